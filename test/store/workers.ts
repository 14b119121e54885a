/**
 * The live-workers suite: the storage operations (heartbeatWorker,
 * removeWorker, pruneWorkers, listWorkers) and a real worker pool's row,
 * written once and run on SQLite and PostgreSQL (test/store/sqlite.test.ts,
 * test/store/pg.test.ts).
 *
 * Time is moved by editing rows (a heartbeat made old), never by sleeping; a
 * pool's heartbeat is awaited as a condition on its row (bounded), with the
 * pool's shortest interval.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Schema, Scope } from "effect"
import { readFileSync } from "node:fs"
import { hostname } from "node:os"
import { Handler, QueueRepo, type Wakeups, Worker } from "../../src/index.js"
import { InvalidInput } from "../../src/Errors.js"
import type { Backend } from "../support/db.js"
import { ddl, repoLayer, unsafe } from "../support/db.js"
import { waitForEvent } from "../support/events.js"

const VERSION = String(JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version)

const Repo = QueueRepo.QueueRepo

const beat = (overrides: Partial<QueueRepo.WorkerHeartbeat> = {}): QueueRepo.WorkerHeartbeat => ({
  id: "w1#0001",
  name: "w1",
  host: "host-a",
  pid: 4242,
  kinds: ["mail.send", "report.build"],
  concurrency: 10,
  version: "9.9.9",
  running: 0,
  ...overrides
})

/** Runs a statement on the live-workers table, with ? marks (numbered for PostgreSQL). */
const exec = (text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    let n = 0
    const numbered = sql.onDialectOrElse({ pg: () => text.replace(/\?/g, () => `$${++n}`), orElse: () => text })
    return unsafe(numbered, params)
  })

/** Moves a pool's last heartbeat `ms` into the past. */
const age = (id: string, ms: number) => exec("UPDATE docket_workers SET heartbeat_at = heartbeat_at - ? WHERE id = ?", [ms, id])

const list = Effect.flatMap(Repo, (repo) => repo.listWorkers())

const rowOf = (id: string) => Effect.map(list, (workers) => workers.find((w) => w.id === id))

/** Reads until `done` holds (a condition on rows, checked every 20 ms), failing after 10 s. */
const until = <A, E, R>(read: Effect.Effect<A, E, R>, done: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (;;) {
      const value = yield* read
      if (done(value)) return value
      yield* Effect.sleep("20 millis")
    }
  }).pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error("condition not met within 10 s") }))

const Job = Handler.make("job", { payload: Schema.Unknown, run: () => Effect.void })

/** Runs `program` on a fresh database with its QueueRepo (and Wakeups, for pools), in a scope closed before the database. */
const withRepo = <A, E>(
  backend: Backend,
  program: Effect.Effect<A, E, QueueRepo.QueueRepo | Wakeups.Wakeups | SqlClient.SqlClient | Scope.Scope>
): Effect.Effect<A, unknown> =>
  Effect.flatMap(Effect.promise(() => backend.fresh()), (url) =>
    Effect.provide(Effect.scoped(program), repoLayer(url))).pipe(Effect.timeout("45 seconds"))

/** A pool in a scope of its own: `stop` closes it (a graceful stop); closed with the test's scope at the latest. */
const startPool = (options: Worker.Options) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const pool = yield* Worker.make(options).pipe(Scope.extend(scope))
    return { pool, stop: Scope.close(scope, Exit.void) }
  })

/** Each pool's id and status, by id. */
const statuses = Effect.map(
  Effect.flatMap(Repo, (repo) => repo.listWorkers()),
  (workers) => workers.map((w) => [w.id, w.status]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
)

const liveWorkersTable = (backend: Backend) => {
  describe("the live-workers table", () => {
    it.live("a heartbeat registers a pool; later ones renew running and the heartbeat time, the start time kept", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        const startedAt = yield* repo.heartbeatWorker(beat())
        const [first] = yield* list
        expect(first).toMatchObject({
          id: "w1#0001",
          name: "w1",
          host: "host-a",
          pid: 4242,
          kinds: ["mail.send", "report.build"],
          concurrency: 10,
          running: 0,
          version: "9.9.9",
          startedAt,
          heartbeatAt: startedAt,
          status: "live"
        })
        expect(first.heartbeatAgeMs).toBeGreaterThanOrEqual(0)
        expect(first.heartbeatAgeMs).toBeLessThan(5_000)
        // The last heartbeat 10 s ago: the next one moves it to now, with what runs now.
        yield* age("w1#0001", 10_000)
        expect((yield* rowOf("w1#0001"))?.heartbeatAgeMs).toBeGreaterThanOrEqual(10_000)
        expect(yield* repo.heartbeatWorker(beat({ running: 3, startedAt }))).toBe(startedAt)
        const renewed = yield* rowOf("w1#0001")
        expect(renewed).toMatchObject({ running: 3, startedAt, status: "live" })
        expect(renewed!.heartbeatAt).toBeGreaterThanOrEqual(first.heartbeatAt)
        expect(renewed!.heartbeatAgeMs).toBeLessThan(5_000)
        // A pool claiming every kind: kinds null.
        yield* repo.heartbeatWorker(beat({ id: "all#0002", name: "all", kinds: null }))
        expect((yield* rowOf("all#0002"))?.kinds).toBeNull()
        expect((yield* list).map((w) => w.id)).toEqual(["all#0002", "w1#0001"])
      })))

    it.live("a row removed meanwhile comes back at the next heartbeat, with the start time the pool kept", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        const startedAt = yield* repo.heartbeatWorker(beat())
        yield* exec("UPDATE docket_workers SET started_at = started_at - 60000")
        const earlier = (yield* rowOf("w1#0001"))!.startedAt
        expect(earlier).toBe(startedAt - 60_000)
        expect(yield* repo.removeWorker("w1#0001")).toBe(true)
        expect(yield* list).toEqual([])
        expect(yield* repo.heartbeatWorker(beat({ running: 2, startedAt: earlier }))).toBe(earlier)
        expect(yield* rowOf("w1#0001")).toMatchObject({ startedAt: earlier, running: 2, status: "live" })
      })))

    it.live("a graceful removal: true once, then false; other pools keep their rows", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.heartbeatWorker(beat())
        yield* repo.heartbeatWorker(beat({ id: "w1#0002" }))
        expect(yield* repo.removeWorker("w1#0001")).toBe(true)
        expect(yield* repo.removeWorker("w1#0001")).toBe(false)
        expect((yield* list).map((w) => w.id)).toEqual(["w1#0002"])
      })))

    it.live("a heartbeat older than the gone age shows the pool as gone; pruning removes those silent longer than its age", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        for (const id of ["fresh#1", "stale#1", "dead#1"]) yield* repo.heartbeatWorker(beat({ id, name: id.split("#")[0] }))
        yield* age("stale#1", 16_000) // three 5 s heartbeats missed
        yield* age("dead#1", 2 * 3_600_000)
        const shown = yield* list
        expect(shown.map((w) => [w.id, w.status])).toEqual([["dead#1", "gone"], ["fresh#1", "live"], ["stale#1", "gone"]])
        expect(shown.find((w) => w.id === "stale#1")!.heartbeatAgeMs).toBeGreaterThanOrEqual(16_000)
        // The gone age is the reader's choice.
        const patient = yield* repo.listWorkers({ goneAfter: "1 minute" })
        expect(patient.map((w) => [w.id, w.status])).toEqual([["dead#1", "gone"], ["fresh#1", "live"], ["stale#1", "live"]])
        // An hour: only the pool silent for two goes.
        expect(yield* repo.pruneWorkers("1 hour")).toEqual(["dead#1"])
        expect((yield* list).map((w) => w.id)).toEqual(["fresh#1", "stale#1"])
        expect(yield* repo.pruneWorkers("1 hour")).toEqual([])
      })))

    it.live("a bad heartbeat or age is refused before anything is written", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        const refused = (effect: Effect.Effect<unknown, unknown>) => Effect.flip(effect)
        const cases: ReadonlyArray<readonly [Partial<QueueRepo.WorkerHeartbeat>, string, RegExp]> = [
          [{ id: "" }, "pool", /^id must be a non-empty text/],
          [{ name: "x".repeat(256) }, "pool", /^name must be/],
          [{ host: "a\u0000b" }, "pool", /^host must be/],
          [{ pid: -1 }, "pool", /^pid must be an integer from 0/],
          [{ concurrency: 0 }, "pool", /^concurrency must be an integer from 1/],
          [{ running: 1.5 }, "pool", /^running must be an integer from 0/],
          [{ version: "" }, "pool", /^version must be/],
          [{ kinds: ["bad kind"] }, "kind", /letters, digits/],
          [{ startedAt: -5 }, "pool", /^startedAt must be an integer from 0/]
        ]
        for (const [override, field, reason] of cases) {
          const error = yield* refused(repo.heartbeatWorker(beat(override)))
          expect(error, JSON.stringify(override)).toBeInstanceOf(InvalidInput)
          expect((error as InvalidInput).field).toBe(field)
          expect((error as InvalidInput).reason).toMatch(reason)
        }
        expect(((yield* refused(repo.removeWorker(""))) as InvalidInput).field).toBe("pool")
        expect(((yield* refused(repo.pruneWorkers(-1))) as InvalidInput).field).toBe("age")
        expect(((yield* refused(repo.listWorkers({ goneAfter: "soon" as never }))) as InvalidInput).field).toBe("age")
        expect(yield* list).toEqual([])
      })))
  })
}

const poolRow = (backend: Backend) => {
  describe("a worker pool's row", () => {
    it.live("registered at start with its fields; two pools of one name have a row each; a graceful stop removes it", () =>
      withRepo(backend, Effect.gen(function*() {
        const Other = Handler.make("another.kind", { payload: Schema.Unknown, run: () => Effect.void })
        const a = yield* startPool({ handlers: [Other, Job], worker: "same", concurrency: 3 })
        const b = yield* startPool({ handlers: [Job], worker: "same", claimKinds: "all" })
        expect(a.pool.poolId).not.toBe(b.pool.poolId)
        expect(a.pool.poolId.startsWith("same#")).toBe(true)
        const rows = yield* list
        expect(rows).toHaveLength(2)
        expect(rows.find((w) => w.id === a.pool.poolId)).toMatchObject({
          name: "same",
          host: hostname(),
          pid: process.pid,
          kinds: ["another.kind", "job"],
          concurrency: 3,
          running: 0,
          version: VERSION,
          status: "live"
        })
        // claimKinds "all": every kind.
        expect(rows.find((w) => w.id === b.pool.poolId)).toMatchObject({ name: "same", kinds: null, concurrency: 10 })
        yield* a.stop
        expect((yield* list).map((w) => w.id)).toEqual([b.pool.poolId])
        yield* b.stop
        expect(yield* list).toEqual([])
      })))

    it.live("heartbeats carry the items running now, bring a vanished row back, and clear pools silent for an hour", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        const gate = yield* Deferred.make<void>()
        const Slow = Handler.make("slow", { payload: Schema.Unknown, run: () => Deferred.await(gate) })
        const { pool, stop } = yield* startPool({ handlers: [Slow], heartbeat: "50 millis" })
        // Runs before the pool's stop if the test fails early (no wait for the grace).
        yield* Effect.addFinalizer(() => Deferred.succeed(gate, undefined))
        const started = (yield* rowOf(pool.poolId))!
        // Two killed pools: one silent for 20 s (shown gone, kept), one for two hours (removed).
        yield* repo.heartbeatWorker(beat({ id: "killed#1" }))
        yield* repo.heartbeatWorker(beat({ id: "killed#2" }))
        yield* age("killed#1", 20_000)
        yield* age("killed#2", 2 * 3_600_000)
        const events = yield* pool.subscribe
        yield* repo.enqueueMany([{ kind: "slow", payload: 1 }, { kind: "slow", payload: 2 }])
        yield* waitForEvent(events, (e) => e._tag === "Started")
        yield* waitForEvent(events, (e) => e._tag === "Started")
        // Its heartbeat made old: a later heartbeat moves it back to now, with the two runs.
        yield* age(pool.poolId, 60_000)
        const beaten = yield* until(rowOf(pool.poolId), (w) => w !== undefined && w.running === 2 && w.heartbeatAgeMs < 60_000)
        expect(beaten).toMatchObject({ status: "live", startedAt: started.startedAt })
        // The same beat then removes the pool silent for two hours (its own statement: waited for, not raced).
        const expected = [["killed#1", "gone"], [pool.poolId, "live"]].sort(([a], [b]) => (a < b ? -1 : 1))
        expect(yield* until(statuses, (s) => JSON.stringify(s) === JSON.stringify(expected))).toEqual(expected)
        // Removed by someone: back at the next heartbeat, its start time kept.
        expect(yield* repo.removeWorker(pool.poolId)).toBe(true)
        const back = yield* until(rowOf(pool.poolId), (w) => w !== undefined)
        expect(back).toMatchObject({ startedAt: started.startedAt, running: 2 })
        yield* Deferred.succeed(gate, undefined)
        yield* until(rowOf(pool.poolId), (w) => w?.running === 0)
        yield* stop
        expect((yield* list).map((w) => w.id)).toEqual(["killed#1"])
      })))

    it.live("a failed heartbeat is published and logged; the pool runs on and registers again once the table is back", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        const { pool, stop } = yield* startPool({ handlers: [Job], heartbeat: "50 millis" })
        const events = yield* pool.subscribe
        yield* ddl("ALTER TABLE docket_workers RENAME TO docket_workers_away")
        const { event } = yield* waitForEvent(events, (e) => e._tag === "StorageFailed" && e.operation === "heartbeat")
        expect(event._tag === "StorageFailed" && event.error).toMatch(/heartbeatWorker/)
        // Items still run meanwhile.
        const added = yield* repo.enqueue("job", 1)
        yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
        yield* ddl("ALTER TABLE docket_workers_away RENAME TO docket_workers")
        yield* exec("DELETE FROM docket_workers")
        expect(yield* until(rowOf(pool.poolId), (w) => w !== undefined)).toMatchObject({ status: "live" })
        yield* stop
        expect(yield* list).toEqual([])
      })))
  })
}

export const workersSuite = (backend: Backend) => {
  liveWorkersTable(backend)
  poolRow(backend)
}
