/**
 * The horizon watch (src/internal/worker/horizon.ts) on a real PostgreSQL
 * database: a REPEATABLE READ transaction that has read, held open on a
 * session of its own past the threshold, is warned of once per period
 * (TestClock) naming it, its end once; the part's start and stop (nothing
 * after its stop); and nothing at all on SQLite or with the watch off.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, TestClock } from "effect"
import { Budget, SHUTDOWN_DB_MS } from "../../src/internal/worker/bounded.js"
import * as HorizonWatch from "../../src/internal/worker/horizon.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { pgAvailable, pgBackend, pgSession, repoLayer } from "../support/db.js"
import { cleanup, freshRepo, makePublisher, until, withLogLines } from "../support/worker.js"

const backend = pgBackend()
afterAll(async () => {
  await cleanup()
  await backend.cleanup()
})

const PERIOD_MS = 60_000
const config = { ageMs: 50, transactions: 100_000, everyMs: PERIOD_MS }

/** The repository with its horizon reads counted (a real repository: the reads run). */
const counting = (repo: QueueRepo.Service) => {
  const calls = { reads: 0 }
  const counted: QueueRepo.Service = {
    ...repo,
    horizon: (threshold) => Effect.suspend(() => {
      calls.reads++
      return repo.horizon(threshold)
    })
  }
  return { calls, counted }
}

/** A repository on a fresh PostgreSQL database, and its URL. */
const pgRepo = Effect.gen(function*() {
  const url = yield* Effect.promise(() => backend.fresh())
  return { url, repo: Context.get(yield* Layer.build(repoLayer(url)), QueueRepo.QueueRepo) }
})

/** Waits until the watch sleeps towards its next check, a period from now (the last one ended). */
const asleep = Effect.flatMap(TestClock.currentTimeMillis, (now) =>
  until(TestClock.sleeps(), (sleeps) => [...sleeps].includes(now + PERIOD_MS), "the watch asleep"))

describe("the horizon watch", () => {
  it.scoped("on SQLite it starts nothing: no read, at start or later", () =>
    Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const { calls, counted } = counting(repo)
      const part = yield* HorizonWatch.make({ repo: counted, config, publisher: yield* makePublisher() })
      yield* part.start(yield* Effect.scope)
      yield* TestClock.adjust("10 minutes")
      expect(calls.reads).toBe(0)
      yield* part.stop(new Budget(SHUTDOWN_DB_MS))
    }))

  describe.skipIf(!pgAvailable)("on PostgreSQL", () => {
    it.scoped("off (the pool's horizon: false): no read", () =>
      Effect.gen(function*() {
        const { repo } = yield* pgRepo
        const { calls, counted } = counting(repo)
        const part = yield* HorizonWatch.make({ repo: counted, config: null, publisher: yield* makePublisher() })
        yield* part.start(yield* Effect.scope)
        yield* TestClock.adjust("10 minutes")
        expect(calls.reads).toBe(0)
        yield* part.stop(new Budget(SHUTDOWN_DB_MS))
      }))

    it.scoped("a snapshot held past the threshold: one warning per period naming it, one line at its end, nothing after the stop", () =>
      withLogLines((lines) =>
        Effect.gen(function*() {
          const { repo, url } = yield* pgRepo
          const holder = yield* pgSession(url, "nightly-report")
          const pid = (yield* Effect.promise(() => holder.query<{ pid: number }>("SELECT pg_backend_pid() AS pid"))).rows[0].pid
          yield* Effect.promise(() => holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ"))
          yield* Effect.promise(() => holder.query("SELECT count(*) FROM docket_items"))
          // Open past the threshold (50 ms, on the database's clock).
          yield* until(repo.horizon({ age: config.ageMs }), (r) => Option.getOrThrow(r).holders.length > 0)
          const { calls, counted } = counting(repo)
          const part = yield* HorizonWatch.make({ repo: counted, config, publisher: yield* makePublisher() })
          yield* part.start(yield* Effect.scope)
          // The first check at start.
          yield* asleep
          expect(lines).toEqual([
            expect.stringMatching(
              new RegExp(
                `^WARN: docket: the xmin horizon of the queue's database is held back past 50ms or 100000 transactions by ` +
                  `session pid ${pid} \\(application "nightly-report", user \\w+, idle in transaction, transaction open \\d+ms, ` +
                  `xmin \\d+ \\(\\d+ transactions? ago\\), query "SELECT count\\(\\*\\) FROM docket_items"\\); vacuum cannot remove`
              )
            )
          ])
          // Half a period: no check, no line.
          yield* TestClock.adjust(PERIOD_MS / 2)
          expect(calls.reads).toBe(1)
          // A period after the first: the second check, the second warning.
          yield* TestClock.adjust(PERIOD_MS / 2)
          yield* asleep
          expect(calls.reads).toBe(2)
          expect(lines).toHaveLength(2)
          expect(lines[1]).toMatch(new RegExp(`held back past .* by session pid ${pid} \\(`))
          // The hold ends: the next check says so, once.
          yield* Effect.promise(() => holder.query("COMMIT"))
          yield* TestClock.adjust(PERIOD_MS)
          yield* asleep
          expect(lines).toHaveLength(3)
          expect(lines[2]).toBe(
            `WARN: docket: the xmin horizon of the queue's database is no longer held back past 50ms or 100000 transactions ` +
              `(seen held for 2m, by session pid ${pid})`
          )
          yield* TestClock.adjust(PERIOD_MS)
          yield* asleep
          expect(calls.reads).toBe(4)
          expect(lines).toHaveLength(3)
          // Stopped: no check any more.
          yield* part.stop(new Budget(SHUTDOWN_DB_MS))
          yield* TestClock.adjust(10 * PERIOD_MS)
          for (let i = 0; i < 1_000; i++) yield* Effect.yieldNow()
          expect(calls.reads).toBe(4)
        })
      ))
  })
})
