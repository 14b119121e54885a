/**
 * The recurring-schedules suite (src/internal/store/schedules.ts), run on
 * SQLite and PostgreSQL from the QueueRepo suites: the compare-and-set that
 * makes a tick's enqueue happen once (two ticks racing on the same next tick:
 * one enqueues; a failure after the compare-and-set rolls it back with the
 * insert), the missed modes and their bound, a changed expression, the
 * stopped status, the checks at a pool's start, and a pool's ticks running.
 *
 * Time is moved by setting rows (next_tick, declared_at) back, never by
 * sleeping: the schedules here tick hourly or yearly, so no tick falls due
 * while a test runs unless a row says so (the pool test waits for conditions).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import { InvalidSchedule } from "../../src/Errors.js"
import * as Handler from "../../src/Handler.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import * as Recurring from "../../src/Recurring.js"
import * as Worker from "../../src/Worker.js"
import type { Backend } from "../support/db.js"
import { asAdmin, ddl, repoLayer, unsafe } from "../support/db.js"
import { waitForEvent } from "../support/events.js"
import { dbNow } from "../support/harness.js"

const HOUR = 3_600_000
const Repo = QueueRepo.QueueRepo

/** Runs a statement with ? marks (numbered for PostgreSQL). */
const exec = (text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    let n = 0
    const numbered = sql.onDialectOrElse({ pg: () => text.replace(/\?/g, () => `$${++n}`), orElse: () => text })
    return unsafe(numbered, params)
  })

const checked = (schedule: Recurring.Recurring): Recurring.Declaration => {
  const result = Recurring.check(schedule)
  if (result._tag === "Left") throw result.left
  return result.right
}

const hourly = (missed: Recurring.Missed = "one", payload: unknown = { report: "sales" }) =>
  checked(Recurring.make("report.hourly", { cron: "0 * * * *", kind: "report.build", payload, missed }))

const declare = (d: Recurring.Declaration) => Effect.flatMap(Repo, (repo) => repo.declareSchedule(d))
const schedule = (name: string) =>
  Effect.flatMap(Repo, (repo) => repo.listSchedules).pipe(Effect.map((all) => all.find((s) => s.name === name)!))

/** Every item's key, run-after and kind, by id. */
const items = exec("SELECT id, kind, dedupe_key, run_at, payload FROM docket_items ORDER BY id").pipe(
  Effect.map((rows) =>
    rows.map((r) => ({ id: Number(r.id), kind: String(r.kind), key: r.dedupe_key as string, runAt: Number(r.run_at), payload: JSON.parse(String(r.payload)) })))
)

const setSchedule = (name: string, set: Record<string, number | string>) =>
  exec(`UPDATE docket_schedules SET ${Object.keys(set).map((c) => `${c} = ?`).join(", ")} WHERE name = ?`, [...Object.values(set), name])

const floorHour = (t: number) => Math.floor(t / HOUR) * HOUR
const iso = (t: number) => new Date(t).toISOString()

const withRepo = <A, E>(
  backend: Backend,
  program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient | import("../../src/Wakeups.js").Wakeups>
) =>
  Effect.flatMap(Effect.promise(() => backend.fresh()), (url) => Effect.provide(program, repoLayer(url))).pipe(
    Effect.timeout("40 seconds")
  )

/** The schedule's next tick set `hours` back (so that many hourly ticks plus the latest are due), its pools live or gone. */
const moveBack = (name: string, hours: number, stale: boolean) =>
  Effect.gen(function*() {
    const now = yield* dbNow
    const from = floorHour(now) - hours * HOUR
    yield* setSchedule(name, { next_tick: from, declared_at: stale ? now - 60_000 : now })
    return { now, from, latest: floorHour(now) }
  })

const declareAndRace = (backend: Backend) => {
  it.live("a declaration stores the schedule with its first tick after now, live", () =>
    withRepo(backend, Effect.gen(function*() {
      const before = yield* dbNow
      expect(yield* declare(hourly())).toEqual({ declared: "new", missed: [] })
      const s = yield* schedule("report.hourly")
      expect(s).toMatchObject({
        kind: "report.build", cron: "0 * * * *", tz: null, payload: { report: "sales" }, missed: "one",
        nextTick: floorHour(before) + HOUR, lastTick: null, lastItem: null, status: "live"
      })
      expect(yield* declare(hourly())).toEqual({ declared: "kept", missed: [] })
      expect(yield* items).toEqual([])
    })))

  it.live("two ticks racing on the same next tick: exactly one enqueues, each due tick once", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* declare(hourly())
      const { from, latest } = yield* moveBack("report.hourly", 5, false)
      const racers = yield* Effect.all([repo.tickSchedule("report.hourly", from), repo.tickSchedule("report.hourly", from)], {
        concurrency: "unbounded"
      })
      expect(racers.filter((r) => r.ticked).length).toBe(1)
      const winner = racers.find((r) => r.ticked)!
      const expected = [0, 1, 2, 3, 4, 5].map((h) => from + h * HOUR)
      expect(winner.items.length).toBe(6)
      expect(racers.find((r) => !r.ticked)!.items).toEqual([])
      const stored = yield* items
      expect(stored.map((i) => i.key)).toEqual(expected.map((t) => `report.hourly@${iso(t)}`))
      expect(stored.map((i) => i.runAt)).toEqual(expected)
      expect(stored.every((i) => i.kind === "report.build" && i.payload.report === "sales")).toBe(true)
      expect(yield* schedule("report.hourly")).toMatchObject({
        nextTick: latest + HOUR, lastTick: latest, lastItem: { id: winner.items[5], state: "waiting" }
      })
      // The same expected next tick again: already moved, nothing.
      expect(yield* repo.tickSchedule("report.hourly", from)).toEqual({ ticked: false, items: [] })
      // Whole passes racing: the items they report add up to the due ticks, once each.
      const again = yield* moveBack("report.hourly", 3, false)
      yield* exec("DELETE FROM docket_items")
      const passes = yield* Effect.all([repo.tickSchedules(["report.hourly"]), repo.tickSchedules(["report.hourly"])], {
        concurrency: "unbounded"
      })
      expect(passes[0].enqueued + passes[1].enqueued).toBe(4)
      expect((yield* items).map((i) => i.runAt)).toEqual([0, 1, 2, 3].map((h) => again.from + h * HOUR))
      // A pass that lost reports the schedule due (it reads again); the next pass finds the next tick ahead.
      const after = yield* repo.tickSchedules(["report.hourly"])
      expect(after.enqueued).toBe(0)
      expect(after.nextInMs).toBeGreaterThan(0)
      expect(after.nextInMs).toBeLessThanOrEqual(HOUR)
    })))

  it.live("a failure after the compare-and-set rolls back both the move and the items", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const sql = yield* SqlClient.SqlClient
      yield* declare(hourly())
      const { from } = yield* moveBack("report.hourly", 2, false)
      // Fails the last statement of the tick's transaction, after the compare-and-set and the insert.
      yield* sql.onDialectOrElse({
        pg: () =>
          Effect.zipRight(
            asAdmin(`CREATE FUNCTION refuse_item() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'refused for the test'; END $$`),
            asAdmin(`CREATE TRIGGER refuse_item BEFORE UPDATE OF last_item_id ON docket_schedules
                FOR EACH ROW EXECUTE FUNCTION refuse_item()`)
          ),
        orElse: () =>
          sql.unsafe(`CREATE TRIGGER refuse_item BEFORE UPDATE OF last_item_id ON docket_schedules
              BEGIN SELECT RAISE(ABORT, 'refused for the test'); END`)
      })
      const failed = yield* Effect.exit(repo.tickSchedule("report.hourly", from))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(yield* items).toEqual([])
      expect((yield* schedule("report.hourly")).nextTick).toBe(from)
      // A pass fails the same way and leaves the ticks due for the next one.
      expect(Exit.isFailure(yield* Effect.exit(repo.tickSchedules(["report.hourly"])))).toBe(true)
      expect(yield* items).toEqual([])
      yield* sql.onDialectOrElse({
        pg: () => asAdmin("DROP TRIGGER refuse_item ON docket_schedules"),
        orElse: () => Effect.asVoid(sql.unsafe("DROP TRIGGER refuse_item"))
      })
      expect((yield* repo.tickSchedules(["report.hourly"])).enqueued).toBe(3)
      expect((yield* items).map((i) => i.runAt)).toEqual([from, from + HOUR, from + 2 * HOUR])
    })))
}

const missedTicks = (backend: Backend) => {
  it.live("missed ticks after a stop: skip none, one the latest, all each of them", () =>
    withRepo(backend, Effect.gen(function*() {
      for (const mode of ["skip", "one", "all"] as const) {
        yield* exec("DELETE FROM docket_items")
        const d = checked(Recurring.make(`missed.${mode}`, { cron: "0 * * * *", kind: "report.build", missed: mode }))
        yield* declare(d)
        const { from, latest } = yield* moveBack(d.name, 9, true)
        const outcome = yield* declare(d)
        const stored = yield* items
        const ticks = { skip: [], one: [latest], all: Array.from({ length: 10 }, (_, h) => from + h * HOUR) }[mode]
        expect(stored.map((i) => i.runAt), mode).toEqual(ticks)
        expect(stored.map((i) => i.key), mode).toEqual(ticks.map((t) => `${d.name}@${iso(t)}`))
        expect(outcome).toEqual({ declared: "kept", missed: stored.map((i) => i.id) })
        expect(yield* schedule(d.name), mode).toMatchObject({ nextTick: latest + HOUR, status: "live" })
        // The pool goes on from the next tick: nothing more is due.
        expect((yield* Effect.flatMap(Repo, (r) => r.tickSchedules([d.name]))).enqueued).toBe(0)
      }
    })))

  it.live("missed all is bounded by the 1,000 most recent ticks; a live pool's late ticks are all enqueued", () =>
    withRepo(backend, Effect.gen(function*() {
      const d = hourly("all")
      yield* declare(d)
      const { latest } = yield* moveBack(d.name, 2000, true)
      const outcome = yield* declare(d)
      expect(outcome.missed.length).toBe(Recurring.MISSED_BOUND)
      const stored = yield* items
      expect(stored[0].runAt).toBe(latest - 999 * HOUR)
      expect(stored[stored.length - 1].runAt).toBe(latest)
      // Not stopped (declared_at fresh): a declaration enqueues nothing, the pass every late tick.
      yield* exec("DELETE FROM docket_items")
      const live = yield* moveBack(d.name, 20, false)
      expect(yield* declare(d)).toEqual({ declared: "kept", missed: [] })
      expect((yield* Effect.flatMap(Repo, (r) => r.tickSchedules([d.name]))).enqueued).toBe(21)
      expect((yield* items).map((i) => i.runAt)).toEqual(Array.from({ length: 21 }, (_, h) => live.from + h * HOUR))
    })))
}

const changesAndStops = (backend: Backend) => {
  it.live("a changed expression goes on from its own next tick; a changed payload from the next item", () =>
    withRepo(backend, Effect.gen(function*() {
      yield* declare(hourly())
      yield* moveBack("report.hourly", 3, true)
      const changed = checked(Recurring.make("report.hourly", { cron: "30 * * * *", kind: "report.build", payload: { v: 2 } }))
      const now = yield* dbNow
      expect(yield* declare(changed)).toEqual({ declared: "changed", missed: [] })
      const s = yield* schedule("report.hourly")
      const next = floorHour(now) + HOUR / 2
      expect(s).toMatchObject({ cron: "30 * * * *", payload: { v: 2 }, nextTick: next > now ? next : next + HOUR })
      expect(yield* items).toEqual([])
      // Only the payload changes: the next tick is kept, the items carry the new payload.
      const payloadOnly = checked(Recurring.make("report.hourly", { cron: "30 * * * *", kind: "report.build", payload: { v: 3 } }))
      expect(yield* declare(payloadOnly)).toEqual({ declared: "kept", missed: [] })
      expect((yield* schedule("report.hourly")).nextTick).toBe(s.nextTick)
      yield* setSchedule("report.hourly", { next_tick: s.nextTick - HOUR })
      expect((yield* Effect.flatMap(Repo, (r) => r.tickSchedules(["report.hourly"]))).enqueued).toBe(1)
      expect((yield* items).map((i) => i.payload)).toEqual([{ v: 3 }])
    })))

  it.live("a schedule nobody touched for 15 s is stopped; a touch makes it live", () =>
    withRepo(backend, Effect.gen(function*() {
      yield* declare(hourly())
      const now = yield* dbNow
      yield* setSchedule("report.hourly", { declared_at: now - 16_000 })
      expect(yield* schedule("report.hourly")).toMatchObject({ status: "stopped" })
      yield* Effect.flatMap(Repo, (r) => r.touchSchedules(["report.hourly"]))
      expect(yield* schedule("report.hourly")).toMatchObject({ status: "live" })
    })))
}

const inAPool = (backend: Backend) => {
  it.live("a pool refuses a bad schedule at start with InvalidSchedule naming it, and writes nothing", () =>
    withRepo(backend, Effect.gen(function*() {
      const bad: ReadonlyArray<readonly [ReadonlyArray<Recurring.Recurring>, string, RegExp]> = [
        [[Recurring.make("nightly", { cron: "61 * * * *", kind: "k" })], "nightly", /cron "61 \* \* \* \*"/],
        [[Recurring.make("nightly", { cron: "every day", kind: "k" })], "nightly", /cron "every day"/],
        [[Recurring.make("zoned", { cron: "0 6 * * *", kind: "k", tz: "Mars/Olympus" })], "zoned", /in Mars\/Olympus: .*time zone/i],
        [[Recurring.make("bad name!", { cron: "0 6 * * *", kind: "k" })], "bad name!", /its name may hold only/],
        [[Recurring.make("n", { cron: "0 6 * * *", kind: "k", payload: { n: 1n } })], "n", /its payload/],
        [[Recurring.make("n", { cron: "0 6 * * *", kind: "k", missed: "some" as never })], "n", /missed must be/],
        [[Recurring.make("twice", { cron: "0 6 * * *", kind: "k" }), Recurring.make("twice", { cron: "0 7 * * *", kind: "k" })], "twice", /declared twice/]
      ]
      for (const [recurring, name, reason] of bad) {
        const exit = yield* Effect.exit(Effect.scoped(Worker.make({ handlers: [], recurring })))
        expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit).toBeInstanceOf(InvalidSchedule)
        const error = (exit as Exit.Failure<never, InvalidSchedule>).cause as unknown as { error: InvalidSchedule }
        expect(error.error.name).toBe(name)
        expect(error.error.reason).toMatch(reason)
        expect(error.error.message).toContain(`invalid schedule ${JSON.stringify(name)}`)
      }
      expect(yield* Effect.flatMap(Repo, (r) => r.listSchedules)).toEqual([])
    })))

  it.live("a pool enqueues each tick of an every-second schedule, and its handler sees the tick as runAt", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const runs: Array<Handler.Job> = []
      const Tick = Handler.make("tick", {
        payload: Schema.Struct({ n: Schema.Number }),
        run: (_, job) => Effect.sync(() => void runs.push(job))
      })
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Worker.make({
          handlers: [Tick],
          poll: "200 millis",
          recurring: [Recurring.make("tick.every", { cron: "* * * * * *", kind: "tick", payload: { n: 1 } })]
        })
        const deadline = Date.now() + 15_000
        while (runs.length < 3 && Date.now() < deadline) yield* Effect.sleep("50 millis")
      })).pipe(Effect.provide(repoLayer(url)))
      expect(runs.length).toBeGreaterThanOrEqual(3)
      for (const job of runs) {
        expect(job.runAt % 1000).toBe(0)
        expect(job.key).toBe(`tick.every@${iso(job.runAt)}`)
        expect(Recurring.tickOf(job)).toBe(job.runAt)
      }
      const ticks = runs.map((j) => j.runAt).sort((a, b) => a - b)
      expect(new Set(ticks).size).toBe(ticks.length)
      // Consecutive seconds: none lost between the first and the last.
      expect(ticks[ticks.length - 1] - ticks[0]).toBe((ticks.length - 1) * 1000)
    }).pipe(Effect.timeout("40 seconds")))
  it.live("a database failure is published and retried; the pool lives on and enqueues the ticks due meanwhile", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const ticks = new Set<number>()
      const Tick = Handler.make("tick", { payload: Schema.Unknown, run: (_, job) => Effect.sync(() => void ticks.add(job.runAt)) })
      const waitUntil = (what: string, done: () => boolean) =>
        Effect.gen(function*() {
          const deadline = Date.now() + 15_000
          while (!done()) {
            if (Date.now() > deadline) return yield* Effect.fail(new Error(`timed out waiting for ${what}`))
            yield* Effect.sleep("50 millis")
          }
        })
      yield* Effect.scoped(Effect.gen(function*() {
        const pool = yield* Worker.make({
          handlers: [Tick],
          poll: "200 millis",
          recurring: [Recurring.make("tick.every", { cron: "* * * * * *", kind: "tick" })]
        })
        const events = yield* pool.subscribe
        yield* waitUntil("a first tick", () => ticks.size >= 1)
        yield* ddl("ALTER TABLE docket_schedules RENAME TO docket_schedules_away")
        const failed = yield* waitForEvent(events, (e) => e._tag === "StorageFailed" && e.operation === "tick schedules")
        expect(failed.event).toMatchObject({ _tag: "StorageFailed", operation: "tick schedules" })
        // Two more ticks fall due while the table is away.
        const away = yield* dbNow
        yield* Effect.sleep("2200 millis")
        yield* ddl("ALTER TABLE docket_schedules_away RENAME TO docket_schedules")
        yield* waitUntil("the ticks due while the table was away, and one after", () => {
          const last = Math.max(...ticks)
          return last > away + 3000
        })
      })).pipe(Effect.provide(repoLayer(url)))
      const sorted = [...ticks].sort((a, b) => a - b)
      // Every second from the first to the last: none lost to the failure.
      expect(sorted[sorted.length - 1] - sorted[0]).toBe((sorted.length - 1) * 1000)
    }).pipe(Effect.timeout("40 seconds")))
}

export const schedulesSuite = (backend: Backend) => {
  describe("recurring schedules", () => {
    declareAndRace(backend)
    missedTicks(backend)
    changesAndStops(backend)
    inAPool(backend)
  })
}
