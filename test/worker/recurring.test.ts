/**
 * The ticker (src/internal/worker/recurring.ts) on a real SQLite file: its
 * schedules declared at start, a due tick's item enqueued once, a failed pass
 * retried a second later, and its stop. Its sleeps are on Effect's clock
 * (TestClock here); ticks fall due by setting a schedule's next_tick back,
 * never by waiting for one: the schedule ticks yearly (on 1 January, UTC: a
 * run never crosses a tick, as it could an hour's). Checking a schedule is
 * not the ticker's: Worker.make refuses a bad one (Recurring.checkAll) before
 * any part is built, tested in the store suite (test/store/schedules.ts).
 */
import type { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Queue, TestClock } from "effect"
import { Budget, SHUTDOWN_DB_MS } from "../../src/internal/worker/bounded.js"
import * as Ticker from "../../src/internal/worker/recurring.js"
import type * as QueueRepo from "../../src/QueueRepo.js"
import * as Recurring from "../../src/Recurring.js"
import { cleanup, freshRepo, makePublisher, until } from "../support/worker.js"

afterAll(cleanup)

const yearly = (name = "report.yearly"): Recurring.Declaration => {
  const checked = Recurring.check(Recurring.make(name, { cron: "0 0 1 1 *", kind: "report.build" }))
  if (checked._tag === "Left") throw checked.left
  return checked.right
}

/** The repository with the ticker's passes counted (counted before the statement, so a pass shows at once). */
const counting = (repo: QueueRepo.Service) => {
  const calls = { passes: 0 }
  const counted: QueueRepo.Service = {
    ...repo,
    tickSchedules: (names) => Effect.zipRight(Effect.sync(() => calls.passes++), repo.tickSchedules(names))
  }
  return { calls, counted }
}

/** Waits until the ticker's fiber sleeps (its pass and touch ended), so that moving the TestClock wakes it. */
const asleep = until(TestClock.sleeps(), (sleeps) => sleeps.length === 1, "one fiber asleep")

/** Moves the TestClock to the ticker's wake-up (it sleeps, see `asleep`): exactly one more turn. */
const wakeOnce = Effect.gen(function*() {
  yield* asleep
  const [wakesAt] = yield* TestClock.sleeps()
  yield* TestClock.setTime(wakesAt)
})

/** Lets forked fibers run (no time passes under the TestClock). */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 1_000; i++) yield* Effect.yieldNow()
})

/** The tick items' keys, by id. */
const keys = (sql: SqlClient.SqlClient) =>
  Effect.map(sql.unsafe<{ dedupe_key: string }>("SELECT dedupe_key FROM docket_items ORDER BY id"), (rows) =>
    rows.map((r) => r.dedupe_key))

/** The schedule's next tick set `years` years back from this year's (1 January, UTC): `years + 1` ticks are due. */
const moveBack = (sql: SqlClient.SqlClient, name: string, years: number) =>
  Effect.gen(function*() {
    const [{ ms }] = yield* sql.unsafe<{ ms: number }>("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS ms")
    const year = new Date(Number(ms)).getUTCFullYear()
    const ticks = Array.from({ length: years + 1 }, (_, i) => Date.UTC(year - years + i, 0, 1))
    yield* sql.unsafe("UPDATE docket_schedules SET next_tick = ? WHERE name = ?", [ticks[0], name])
    return ticks.map((tick) => `${name}@${new Date(tick).toISOString()}`)
  })

const setup = Effect.gen(function*() {
  const { repo, sql } = yield* freshRepo
  const { calls, counted } = counting(repo)
  const publisher = yield* makePublisher()
  const woken = { n: 0 }
  const ticker = yield* Ticker.make({ repo: counted, declarations: [yearly()], publisher, wake: () => woken.n++ })
  return { repo, sql, calls, publisher, woken, ticker }
})

describe("the ticker", () => {
  it.scoped("declares its schedules at start (waited for): listed, live, and no tick enqueued before one is due", () =>
    Effect.gen(function*() {
      const t = yield* setup
      expect(yield* t.repo.listSchedules).toEqual([])
      yield* t.ticker.start(yield* Effect.scope)
      const [listed] = yield* t.repo.listSchedules
      expect(listed).toMatchObject({ name: "report.yearly", kind: "report.build", cron: "0 0 1 1 *", status: "live", lastTick: null })
      yield* until(Effect.sync(() => t.calls.passes), (n) => n >= 1)
      expect(yield* keys(t.sql)).toEqual([])
      expect(t.woken.n).toBe(0)
      yield* t.ticker.stop(new Budget(SHUTDOWN_DB_MS))
    }))

  it.scoped("a pool with no schedule starts no fiber", () =>
    Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const { calls, counted } = counting(repo)
      const ticker = yield* Ticker.make({ repo: counted, declarations: [], publisher: yield* makePublisher(), wake: () => {} })
      yield* ticker.start(yield* Effect.scope)
      yield* settle
      expect(yield* TestClock.sleeps()).toEqual(Chunk.empty())
      expect(calls.passes).toBe(0)
      expect(yield* repo.listSchedules).toEqual([])
      yield* ticker.stop(new Budget(SHUTDOWN_DB_MS))
    }))

  it.scoped("due ticks are enqueued at its next wake-up, one item per tick, and the claimer is woken; a later pass adds none", () =>
    Effect.gen(function*() {
      const t = yield* setup
      yield* t.ticker.start(yield* Effect.scope)
      yield* asleep
      expect(t.calls.passes).toBe(1)
      const due = yield* moveBack(t.sql, "report.yearly", 2)
      // It sleeps at most until the next touch (5 s) before its next pass.
      yield* wakeOnce
      expect(yield* until(keys(t.sql), (k) => k.length >= 3)).toEqual(due)
      expect(t.woken.n).toBe(1)
      yield* wakeOnce
      yield* until(Effect.sync(() => t.calls.passes), (n) => n === 3)
      yield* asleep
      expect(yield* keys(t.sql)).toEqual(due)
      expect(t.woken.n).toBe(1)
      expect((yield* t.repo.listSchedules)[0].lastTick).toBe(Date.parse(due[2].split("@")[1]))
      yield* t.ticker.stop(new Budget(SHUTDOWN_DB_MS))
    }))

  it.scoped("a failed pass is published as a storage failure and retried a second later", () =>
    Effect.gen(function*() {
      const t = yield* setup
      const events = yield* t.publisher.subscribe
      yield* t.ticker.start(yield* Effect.scope)
      yield* t.sql.unsafe("ALTER TABLE docket_schedules RENAME TO docket_schedules_away")
      yield* wakeOnce
      expect(yield* Queue.take(events)).toMatchObject({
        _tag: "StorageFailed",
        operation: "tick schedules"
      })
      yield* t.sql.unsafe("ALTER TABLE docket_schedules_away RENAME TO docket_schedules")
      const due = yield* moveBack(t.sql, "report.yearly", 0)
      yield* asleep
      const [wakesAt] = yield* TestClock.sleeps()
      expect(wakesAt - (yield* TestClock.currentTimeMillis)).toBe(1_000)
      yield* TestClock.adjust("1 second")
      expect(yield* until(keys(t.sql), (k) => k.length >= 1)).toEqual(due)
      yield* t.ticker.stop(new Budget(SHUTDOWN_DB_MS))
    }))

  it.scoped("a stop ends its fiber: no pass, and no tick enqueued, after it", () =>
    Effect.gen(function*() {
      const t = yield* setup
      yield* t.ticker.start(yield* Effect.scope)
      yield* asleep
      yield* t.ticker.stop(new Budget(SHUTDOWN_DB_MS))
      const passes = t.calls.passes
      yield* moveBack(t.sql, "report.yearly", 2)
      // A live fiber would count its next pass at once (before any statement) when its sleep ends.
      yield* TestClock.adjust("1 hour")
      yield* settle
      expect(t.calls.passes).toBe(passes)
      expect(yield* keys(t.sql)).toEqual([])
      expect(t.woken.n).toBe(0)
    }))
})
