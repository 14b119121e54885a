/**
 * The global limits part (src/internal/worker/globalLimits.ts) on a real
 * SQLite file: the handlers' declared limits written at start ("set by code"),
 * a person's setting kept, the background retry when the database cannot take
 * them (its 5 s spacing on the TestClock; the database "down" is a trigger
 * refusing writes to its kinds table), and a stop that ends that retry within
 * its budget.
 */
import type { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import type { GlobalLimits } from "../../src/Domain.js"
import { Budget, SHUTDOWN_DB_MS } from "../../src/internal/worker/bounded.js"
import * as GlobalLimitsPart from "../../src/internal/worker/globalLimits.js"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { cleanup, freshRepo, until, withLogLines } from "../support/worker.js"

afterAll(cleanup)

const declared = new Map<string, GlobalLimits>([
  ["report", { concurrency: 2, rate: { limit: 10, period: "1 minute" } }],
  ["mail", { concurrency: 5 }]
])

/** The repository with its declarations counted (and, once `hold` is set, held there uninterruptibly until it opens). */
const counting = (repo: QueueRepo.Service) => {
  const calls = { declarations: 0, hold: undefined as Deferred.Deferred<void> | undefined }
  const counted: QueueRepo.Service = {
    ...repo,
    declareKindLimits: (kind, limits) =>
      Effect.suspend(() => {
        calls.declarations++
        const hold = calls.hold
        const held = hold === undefined ? Effect.void : Effect.uninterruptible(Deferred.await(hold))
        return Effect.zipRight(held, repo.declareKindLimits(kind, limits))
      })
  }
  return { calls, counted }
}

/** The kinds' limits as listed, by kind. */
const limitsOf = (repo: QueueRepo.Service) =>
  Effect.map(repo.listKinds, (kinds) =>
    Object.fromEntries(kinds.map((k) => [k.kind, { concurrency: k.concurrency, rate: k.rate, by: k.limitsSetBy }])))

/** Waits until some fiber sleeps on the TestClock (the retry's spacing, a stop's bound). */
const asleep = until(TestClock.sleeps(), (sleeps) => sleeps.length === 1, "one fiber asleep")

/** The database refusing every write of a kind's limits (a trigger raising an error), as when it is down. */
const down = (sql: SqlClient.SqlClient) =>
  Effect.zipRight(
    sql.unsafe("CREATE TRIGGER down_insert BEFORE INSERT ON docket_kinds BEGIN SELECT RAISE(ABORT, 'down'); END"),
    sql.unsafe("CREATE TRIGGER down_update BEFORE UPDATE ON docket_kinds BEGIN SELECT RAISE(ABORT, 'down'); END")
  )
const up = (sql: SqlClient.SqlClient) =>
  Effect.zipRight(sql.unsafe("DROP TRIGGER down_insert"), sql.unsafe("DROP TRIGGER down_update"))

const setup = Effect.gen(function*() {
  const { repo, sql } = yield* freshRepo
  const { calls, counted } = counting(repo)
  const part = yield* GlobalLimitsPart.make({ repo: counted, limits: declared })
  return { repo, sql, calls, part }
})

const written = {
  report: { concurrency: 2, rate: { limit: 10, periodMs: 60_000 }, by: "code" },
  mail: { concurrency: 5, rate: null, by: "code" }
}

describe("the global limits", () => {
  it.scoped("the handlers' declared limits are written at start (waited for), as set by code", () =>
    Effect.gen(function*() {
      const t = yield* setup
      yield* t.part.start(yield* Effect.scope)
      expect(yield* limitsOf(t.repo)).toEqual(written)
      yield* t.part.stop(new Budget(SHUTDOWN_DB_MS))
    }))

  it.scoped("a person's setting is kept: the declaration does not overwrite it", () =>
    Effect.gen(function*() {
      const t = yield* setup
      yield* t.repo.setKindLimits("report", { concurrency: 7 })
      yield* t.part.start(yield* Effect.scope)
      const limits = yield* limitsOf(t.repo)
      expect(limits.report).toEqual({ concurrency: 7, rate: null, by: "person" })
      expect(limits.mail).toEqual(written.mail)
      yield* t.part.stop(new Budget(SHUTDOWN_DB_MS))
    }))

  it.scoped("a database that cannot take them does not fail the start: a warning, then a retry every 5 s until written", () =>
    withLogLines((lines) =>
      Effect.gen(function*() {
        const t = yield* setup
        yield* down(t.sql)
        yield* t.part.start(yield* Effect.scope)
        expect(lines).toEqual([expect.stringMatching(/^WARN: docket: cannot write the handlers' global limits \(.*\); retrying every 5 s$/)])
        yield* asleep
        const [retryAt] = yield* TestClock.sleeps()
        expect(retryAt - (yield* TestClock.currentTimeMillis)).toBe(5_000)
        yield* up(t.sql)
        yield* TestClock.adjust("5 seconds")
        expect(yield* until(limitsOf(t.repo), (l) => Object.keys(l).length === 2)).toEqual(written)
        yield* t.part.stop(new Budget(SHUTDOWN_DB_MS))
      })
    ))

  it.scoped("a stop ends the background retry: nothing is tried, nor written, after it", () =>
    Effect.gen(function*() {
      const t = yield* setup
      yield* down(t.sql)
      yield* t.part.start(yield* Effect.scope)
      yield* asleep
      yield* t.part.stop(new Budget(SHUTDOWN_DB_MS))
      const tried = t.calls.declarations
      yield* up(t.sql)
      yield* TestClock.adjust("1 minute")
      for (let i = 0; i < 1_000; i++) yield* Effect.yieldNow()
      expect(t.calls.declarations).toBe(tried)
      expect(yield* limitsOf(t.repo)).toEqual({})
    }))

  it.scoped("a stop ends within its budget when the retry is stuck in a statement that does not end", () =>
    Effect.gen(function*() {
      const t = yield* setup
      yield* down(t.sql)
      yield* t.part.start(yield* Effect.scope)
      yield* asleep
      const hold = yield* Deferred.make<void>()
      // Opened at the end whatever happens (before the scope ends the retry's fiber).
      yield* Effect.addFinalizer(() => Deferred.succeed(hold, undefined))
      t.calls.hold = hold
      const tried = t.calls.declarations
      yield* TestClock.adjust("5 seconds")
      yield* until(Effect.sync(() => t.calls.declarations), (n) => n > tried)
      const stop = yield* Effect.fork(t.part.stop(new Budget(1_000)))
      // Its budget's time passes (a bound is a sleep on the TestClock); the statement is still held.
      yield* TestClock.adjust("1 second")
      yield* until(Effect.sync(() => stop.unsafePoll()), (exit) => exit !== null)
      yield* Fiber.join(stop)
    }))
})
