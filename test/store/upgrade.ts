/**
 * Part of the shared store suite (run from ./suite.ts on every
 * backend): a database made by the release before migration 0005 upgrades in
 * place, and processes of that release keep working beside migrated ones; a
 * database made by the release of 0005 upgrades to 0006 with every item
 * as it was; and one made by the last release (0006) upgrades to the latest
 * (0007, history) with every item runnable and its past backfilled; and one
 * at 0008 (recurring) upgrades to 0009 (retries per minute) with a claim
 * taken before it still failing, counted, with its token; and one at 0010
 * upgrades to 0011 (on PostgreSQL done items move to docket_done) with every
 * row as it was, while a worker of the release before completes in place.
 *
 * The release's own statements are written out here as it sent them, so the
 * test keeps meaning what it says when the current statements change.
 */
import { SqlClient } from "@effect/sql"
import * as Migrator from "@effect/sql/Migrator"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import pg from "pg"
import * as Database from "../../src/Database.js"
import * as Migrations from "../../src/Migrations.js"
import { files } from "../../src/internal/migrationFiles.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countState, setRow } from "../support/db.js"

/** The migrations an upgrade from `last` applies: every one after it, to the latest. */
const LATEST = 22
const appliedAfter = (last: number) => Array.from({ length: LATEST - last }, (_, i) => last + 1 + i)

const migrateUpTo = (last: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
    const migrations = (yield* files(dialect)).filter((m) => m.id <= last)
    return yield* Migrator.make({})({
      table: Migrations.TABLE,
      loader: Effect.succeed(migrations.map((m): Migrator.ResolvedMigration => [
        m.id,
        m.name,
        Effect.succeed(Effect.forEach(m.statements, (statement) => sql.unsafe(statement), { discard: true }))
      ]))
    })
  })

// The release before 0005: a single enqueue on PostgreSQL, its max attempts
// always given (the request's, else the default 8).
const OLD_PG_ENQUEUE = `SELECT new_id AS id, new_kind AS kind, new_key AS dedupe_key
FROM docket_enqueue_one($1::text, $2::text, $3::text, $4::int, $5::bigint, $6::bigint, $7::int)`

// ... and on SQLite (its insert, one row of the JSON batch).
const OLD_SQLITE_ENQUEUE = `
INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, created_at, updated_at)
SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3,
       coalesce(j.value ->> 4, n.ms + (j.value ->> 5)), j.value ->> 6, n.ms, n.ms
FROM json_each(?) j, (SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS ms) n
WHERE true
ORDER BY j.key
ON CONFLICT DO NOTHING
RETURNING id, kind, dedupe_key`

// The complete of the release before 0011 (retention above 0): the item is
// marked done in place, as a worker of that release still does while the
// others are upgraded.
const OLD_PG_COMPLETE = `
UPDATE docket_items i
SET state = 'done', result = c.result, finished_at = docket_now_ms(), lease_until = NULL, updated_at = docket_now_ms()
FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS c(id, seq, result)
WHERE i.id = c.id AND i.lease_seq = c.seq AND i.state = 'running'
RETURNING i.id, i.lease_seq`

// The release's claim on PostgreSQL and the columns it read.
const OLD_PG_CLAIM = `SELECT id, kind, payload, dedupe_key, priority, run_at, attempts, max_attempts, last_error, lease_until,
  lease_seq, created_at FROM docket_claim($1::text, $2::int, $3::bigint, $4::text[])`

const oldEnqueue = (kind: string, payload: unknown, key: string | null, maxAttempts: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => sql.unsafe<{ id: number | string }>(OLD_PG_ENQUEUE, [kind, JSON.stringify(payload), key, 0, null, 0, maxAttempts]),
      orElse: () =>
        sql.unsafe<{ id: number | string }>(OLD_SQLITE_ENQUEUE, [
          JSON.stringify([[kind, JSON.stringify(payload), key, 0, null, 0, maxAttempts]])
        ])
    })).pipe(Effect.map((rows) => Number(rows[0].id)))

const fromBefore0005 = (backend: Backend) => {
  describe("upgrading in place from the schema before 0005", () => {
    it.live("stored items keep their budget and stay claimable; the previous release's statements keep working", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const layer = QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { migrate: false })))
        yield* Effect.gen(function*() {
          expect((yield* migrateUpTo(4)).map(([id]) => id)).toEqual([1, 2, 3, 4])
          // The previous release enqueues: without a max attempts (it wrote 8), and with one.
          const plain = yield* oldEnqueue("old.kind", { n: 1 }, null, 8)
          const budgeted = yield* oldEnqueue("old.kind", { n: 2 }, "k", 5)
          // A worker of that release, connected across the upgrade (PostgreSQL: its session's plan is kept).
          const oldWorker = backend.name === "pg" ? new pg.Client({ connectionString: url }) : undefined
          yield* Effect.addFinalizer(() => Effect.promise(async () => oldWorker?.end()))
          if (oldWorker !== undefined) {
            yield* Effect.promise(() => oldWorker.connect())
            yield* Effect.promise(() => oldWorker.query(OLD_PG_CLAIM, ["old", 1, 30_000, ["nothing"]]))
          }

          expect(yield* Migrations.run).toEqual(appliedAfter(4))
          const repo = yield* QueueRepo.QueueRepo
          const stored = (id: number) => Effect.map(repo.get(id), Option.getOrThrow)
          for (const [id, n, budget] of [[plain, 1, 8], [budgeted, 2, 5]] as const) {
            expect(yield* stored(id)).toMatchObject({ payload: { n }, state: "waiting", attempts: 0, maxAttempts: budget, traceContext: null })
          }
          // The previous release still enqueues after the upgrade; its items keep the budget it gave.
          const late = yield* oldEnqueue("old.kind", { n: 3 }, null, 3)
          expect((yield* stored(late)).maxAttempts).toBe(3)
          // This release's item without a budget reads as 8 to that release's worker.
          const fresh = (yield* repo.enqueue("new.kind", { n: 4 })).id
          expect((yield* stored(fresh)).maxAttempts).toBeNull()
          if (oldWorker !== undefined) {
            const { rows } = yield* Effect.promise(() => oldWorker.query(OLD_PG_CLAIM, ["old", 1, 30_000, ["new.kind"]]))
            expect(rows.map((r) => [Number(r.id), r.max_attempts])).toEqual([[fresh, 8]])
          } else {
            const sql = yield* SqlClient.SqlClient
            const rows = yield* sql.unsafe<{ max_attempts: number }>(`SELECT max_attempts FROM docket_items WHERE id = ${fresh}`)
            expect(rows[0].max_attempts).toBe(8)
          }
          // Claimed by this release: the stored budgets win over the kind's.
          const claims = yield* repo.claim({
            worker: "new",
            limit: 10,
            lease: "30 seconds",
            kinds: ["old.kind"],
            maxAttemptsByKind: new Map([["old.kind", 2]])
          })
          expect(claims.map((c) => [c.id, c.maxAttempts, JSON.parse(c.payloadJson)])).toEqual([
            [plain, 8, { n: 1 }],
            [budgeted, 5, { n: 2 }],
            [late, 3, { n: 3 }]
          ])
          expect(yield* repo.completeMany(claims)).toEqual([true, true, true])
        }).pipe(Effect.scoped, Effect.provide(layer))
      }), 60_000)
  })
}

const from0005To0006 = (backend: Backend) => {
  describe("upgrading in place from the last release's schema (0005) to 0006", () => {
    it.live("every item keeps every field; a claim from before completes; ids are never reused", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const layer = QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { migrate: false })))
        yield* Effect.gen(function*() {
          expect((yield* migrateUpTo(5)).map(([id]) => id)).toEqual([1, 2, 3, 4, 5])
          // Items in every state the release had, written with its own enqueue and then set
          // as its workers left them: waiting (keyed), scheduled, running (a live claim:
          // token 1), dead (with its error), and a done one, deleted (its id must not come back).
          const waiting = yield* oldEnqueue("u.kind", { n: 1 }, "k1", 8)
          const scheduled = yield* oldEnqueue("u.kind", { n: 2 }, null, 4)
          const running = yield* oldEnqueue("u.run", { n: 3 }, null, 8)
          const dying = yield* oldEnqueue("u.dead", { n: 4 }, null, 1)
          const done = yield* oldEnqueue("u.done", { n: 5 }, null, 8)
          const now = Date.now()
          yield* setRow(scheduled, { run_at: now + 3_600_000 })
          yield* setRow(running, { state: "running", attempts: 1, lease_seq: 1, claimed_by: "old", lease_until: now + 60_000 })
          yield* setRow(dying, { state: "dead", attempts: 1, lease_seq: 1, last_error: `it's "broken"` })
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe(`DELETE FROM docket_items WHERE id = ${done}`)
          const repo = yield* QueueRepo.QueueRepo
          // Every column as stored, in the table as the release left it.
          const stored = sql.unsafe<Record<string, unknown>>("SELECT * FROM docket_items ORDER BY id")
          const before = yield* stored

          expect((yield* migrateUpTo(6)).map(([id]) => id)).toEqual([6])
          // The same rows, every column the same, and the new one at its default.
          expect(yield* stored).toEqual(before.map((row) => ({ ...row, snoozes: 0 })))
          // This release's statements read 0007's columns: upgrade the rest of the way.
          expect(yield* Migrations.run).toEqual(appliedAfter(6))
          expect(before.map((row) => Number(row.id))).toEqual([waiting, scheduled, running, dying])
          const after = yield* Effect.forEach([waiting, scheduled, running, dying], (id) => repo.get(id))
          expect(Option.getOrThrow(after[3])).toMatchObject({ state: "dead", lastError: `it's "broken"` })
          // The claim taken before the upgrade is still the item's: its token completes it.
          const held = Option.getOrThrow(after[2])
          expect(held).toMatchObject({ state: "running", claimedBy: "old", attempts: 1 })
          expect(yield* repo.complete({ id: running, token: 1 } as QueueRepo.Claim)).toBe(true)
          // The next id is past every id ever given, the deleted one's too.
          const next = (yield* repo.enqueue("u.kind", { n: 6 })).id
          expect(next).toBeGreaterThan(done)
          // The dedupe key still holds, and the waiting item is claimable.
          expect(yield* repo.enqueue("u.kind", { n: 7 }, { key: "k1" })).toEqual({ _tag: "Deduplicated", id: waiting })
          const claimed = yield* repo.claim({ worker: "new", limit: 10, lease: "1 minute", kinds: ["u.kind"] })
          expect(claimed.map((c) => c.id)).toEqual([waiting, next])
        }).pipe(Effect.scoped, Effect.provide(layer))
      }), 60_000)
  })
}

const from0006 = (backend: Backend) => {
  describe("upgrading in place from the last release's schema (0006) to the latest", () => {
    it.live("items in every state come through; finished ones are dated and keep their error; a live claim completes as done with its result", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const layer = QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { migrate: false })))
        yield* Effect.gen(function*() {
          expect((yield* migrateUpTo(6)).map(([id]) => id)).toEqual([1, 2, 3, 4, 5, 6])
          const waiting = yield* oldEnqueue("v.kind", { n: 1 }, "k1", 8)
          const scheduled = yield* oldEnqueue("v.kind", { n: 2 }, null, 4)
          const running = yield* oldEnqueue("v.run", { n: 3 }, null, 8)
          const dead = yield* oldEnqueue("v.dead", { n: 4 }, null, 1)
          const cancelled = yield* oldEnqueue("v.kind", { n: 5 }, null, 8)
          const retrying = yield* oldEnqueue("v.kind", { n: 6 }, null, 8)
          const now = Date.now()
          yield* setRow(scheduled, { run_at: now + 3_600_000 })
          yield* setRow(running, { state: "running", attempts: 1, lease_seq: 1, claimed_by: "old", lease_until: now + 60_000 })
          yield* setRow(dead, { state: "dead", attempts: 1, lease_seq: 1, last_error: `it's "broken"\nline 2`, updated_at: now - 5000 })
          yield* setRow(cancelled, { state: "cancelled", lease_seq: 1, last_error: "Cancelled: not needed", updated_at: now - 7000 })
          yield* setRow(retrying, { attempts: 2, last_error: "Retry: later", updated_at: now - 9000 })

          expect(yield* Migrations.run).toEqual(appliedAfter(6))
          const repo = yield* QueueRepo.QueueRepo
          const item = (id: number) => Effect.map(repo.get(id), Option.getOrThrow)
          expect(yield* item(waiting)).toMatchObject({ state: "waiting", key: "k1", finishedAt: null, errors: [], result: null })
          expect(yield* item(scheduled)).toMatchObject({ state: "waiting", finishedAt: null, errors: [] })
          expect(yield* item(dead)).toMatchObject({
            state: "dead",
            finishedAt: now - 5000,
            errors: [{ attempt: 1, at: now - 5000, worker: null, error: `it's "broken"\nline 2` }]
          })
          expect(yield* item(cancelled)).toMatchObject({
            state: "cancelled",
            finishedAt: now - 7000,
            errors: [{ attempt: 0, at: now - 7000, worker: null, error: "Cancelled: not needed" }]
          })
          // A waiting item with an earlier error: not finished, its error kept as history.
          expect(yield* item(retrying)).toMatchObject({
            state: "waiting",
            finishedAt: null,
            errors: [{ attempt: 2, at: now - 9000, worker: null, error: "Retry: later" }]
          })
          // The claim taken before the upgrade completes with its token, kept as done with its result.
          expect(yield* repo.complete({ id: running, token: 1 } as QueueRepo.Claim, { sent: true })).toBe(true)
          expect(yield* item(running)).toMatchObject({ state: "done", claimedBy: "old", result: { sent: true } })
          // The listings see the backfilled items, newest first.
          expect((yield* repo.list({ state: "dead" })).items.map((i) => i.id)).toEqual([dead])
          expect((yield* repo.list({ state: "cancelled" })).items.map((i) => i.id)).toEqual([cancelled])
          // The rest still runs: a failure adds to the backfilled history.
          const claims = yield* repo.claim({ worker: "new", limit: 10, lease: "1 minute", kinds: ["v.kind"] })
          expect(claims.map((c) => c.id)).toEqual([waiting, retrying])
          expect(yield* repo.fail(claims[1], "Retry: again", { _tag: "Retry", delay: 0 })).toBe("retried")
          expect((yield* item(retrying)).errors.map((e) => [e.attempt, e.worker, e.error])).toEqual([
            [2, null, "Retry: later"],
            [3, "new", "Retry: again"]
          ])
          expect(yield* repo.enqueue("v.kind", { n: 7 }, { key: "k1" })).toMatchObject({ _tag: "Enqueued" })
        }).pipe(Effect.scoped, Effect.provide(layer))
      }), 60_000)
  })
}

const from0008 = (backend: Backend) => {
  describe("upgrading in place from the schema at 0008 to the latest", () => {
    it.live("a claim taken before the upgrade retries with its token and is counted; finished items stay listed", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const layer = QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { migrate: false })))
        yield* Effect.gen(function*() {
          expect((yield* migrateUpTo(8)).map(([id]) => id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
          const running = yield* oldEnqueue("v.run", { n: 1 }, null, 8)
          const dead = yield* oldEnqueue("v.dead", { n: 2 }, null, 1)
          const now = Date.now()
          yield* setRow(running, { state: "running", attempts: 1, lease_seq: 1, claimed_by: "old", lease_until: now + 60_000 })
          yield* setRow(dead, { state: "dead", attempts: 1, lease_seq: 1, last_error: "boom", finished_at: now - 5000 })

          expect(yield* Migrations.run).toEqual(appliedAfter(8))
          const repo = yield* QueueRepo.QueueRepo
          expect(yield* repo.retriedPerMinute(60)).toEqual([])
          expect(yield* repo.fail({ id: running, token: 1 } as QueueRepo.Claim, "again", { _tag: "Retry", delay: 0 })).toBe("retried")
          expect((yield* repo.retriedPerMinute(60)).map((r) => [r.kind, r.count])).toEqual([["v.run", 1]])
          expect((yield* repo.list({ state: "dead" })).items.map((i) => i.id)).toEqual([dead])
          expect(yield* Migrations.run).toEqual([])
        }).pipe(Effect.scoped, Effect.provide(layer))
      }), 60_000)
  })
}

const from0010 = (backend: Backend) => {
  describe("upgrading in place from the schema at 0010 to the latest", () => {
    it.live("every row reads back as it was; done ones stay listed, counted and pruned, and so do items a worker of the release before completes in place", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const layer = QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { migrate: false })))
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
          expect((yield* migrateUpTo(10)).map(([id]) => id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
          const ids = {
            waiting: yield* oldEnqueue("v.kind", { n: 1 }, "k1", 8),
            running: yield* oldEnqueue("v.run", { n: 2 }, null, 8),
            done: yield* oldEnqueue("v.kind", { n: 3 }, "k3", 8),
            old: yield* oldEnqueue("v.kind", { n: 4 }, null, 8),
            dead: yield* oldEnqueue("v.dead", { n: 5 }, null, 1),
            cancelled: yield* oldEnqueue("v.kind", { n: 6 }, null, 8),
            legacy: yield* oldEnqueue("v.run", { n: 7 }, null, 8)
          }
          const now = Date.now()
          const errors = JSON.stringify([{ attempt: 1, at: now - 9000, worker: "w'1", error: `it's "broken"` }])
          yield* setRow(ids.running, { state: "running", attempts: 1, lease_seq: 1, claimed_by: "old", lease_until: now + 60_000 })
          yield* setRow(ids.legacy, { state: "running", attempts: 1, lease_seq: 4, claimed_by: "old", lease_until: now + 60_000 })
          yield* setRow(ids.done, {
            state: "done", attempts: 2, lease_seq: 2, claimed_by: "w'2", finished_at: now - 3000, updated_at: now - 3000,
            result: JSON.stringify({ sent: "ok</script>" }), errors, last_error: `it's "broken"`
          })
          yield* setRow(ids.old, { state: "done", attempts: 1, lease_seq: 1, claimed_by: "w", finished_at: now - 2 * 86_400_000 })
          yield* setRow(ids.dead, { state: "dead", attempts: 1, lease_seq: 1, last_error: "boom", finished_at: now - 5000 })
          yield* setRow(ids.cancelled, { state: "cancelled", lease_seq: 1, last_error: "Cancelled", finished_at: now - 7000 })
          const everyRow = (table: string) => sql.unsafe<Record<string, unknown>>(`SELECT * FROM ${table} ORDER BY id`)
          const before = yield* everyRow("docket_items")

          expect(yield* Migrations.run).toEqual(appliedAfter(10))
          // Every column of every row, whichever table holds it now (and no group: 0017).
          expect(yield* everyRow("docket_items_all")).toEqual(before.map((row) => ({ ...row, group_key: null })))
          if (isPg) {
            const held = yield* sql.unsafe<{ id: string }>("SELECT id FROM docket_done ORDER BY id")
            expect(held.map((r) => Number(r.id))).toEqual([ids.done, ids.old])
            expect(yield* sql.unsafe("SELECT id FROM docket_items WHERE state = 'done'")).toEqual([])
          }
          const repo = yield* QueueRepo.QueueRepo
          const item = (id: number) => Effect.map(repo.get(id), Option.getOrThrow)
          expect(yield* item(ids.done)).toMatchObject({
            state: "done", claimedBy: "w'2", finishedAt: now - 3000, result: { sent: "ok</script>" },
            errors: [{ attempt: 1, at: now - 9000, worker: "w'1", error: `it's "broken"` }]
          })
          // A claim from before completes with its token (moved, on PostgreSQL);
          // a worker of the release before completes its own in place.
          expect(yield* repo.complete({ id: ids.running, token: 1 } as QueueRepo.Claim, { n: 2 })).toBe(true)
          if (isPg) {
            const legacy = yield* sql.unsafe<{ id: string }>(OLD_PG_COMPLETE, [[ids.legacy], [4], [JSON.stringify("legacy")]])
            expect(legacy.map((r) => Number(r.id))).toEqual([ids.legacy])
          } else {
            expect(yield* repo.complete({ id: ids.legacy, token: 4 } as QueueRepo.Claim, "legacy")).toBe(true)
          }
          expect(yield* item(ids.legacy)).toMatchObject({ state: "done", claimedBy: "old", result: "legacy" })
          expect(yield* item(ids.running)).toMatchObject({ state: "done", claimedBy: "old", result: { n: 2 } })
          // Listed newest first across both tables, counted, cancel says finished.
          const listed = (yield* repo.list({ state: "done" })).items.map((i) => i.id)
          expect(new Set(listed.slice(0, 2))).toEqual(new Set([ids.running, ids.legacy]))
          expect(listed.slice(2)).toEqual([ids.done, ids.old])
          expect(yield* countState("done")).toBe(4)
          expect((yield* repo.stats).done).toBe(4)
          expect(yield* repo.cancel([ids.done, ids.legacy, ids.waiting])).toEqual(["finished", "finished", "cancelled"])
          // Pruning reads both: the one two days old goes, and once everything
          // is past its retention the one completed in place goes too.
          expect(yield* repo.prune).toEqual({ done: 1, cancelled: 0, dead: 0 })
          expect(Option.isNone(yield* repo.get(ids.old))).toBe(true)
          for (const table of isPg ? ["docket_items", "docket_done"] : ["docket_items"]) {
            yield* sql.unsafe(`UPDATE ${table} SET finished_at = finished_at - 172800000 WHERE state = 'done'`)
          }
          expect(yield* repo.prune).toEqual({ done: 3, cancelled: 0, dead: 0 })
          expect(yield* countState("done")).toBe(0)
          expect(yield* Migrations.run).toEqual([])
        }).pipe(Effect.scoped, Effect.provide(layer))
      }), 60_000)
  })
}

export const upgradeSuite = (backend: Backend) => {
  fromBefore0005(backend)
  // 0006 rebuilds SQLite's table (a new CHECK) and replaces PostgreSQL's
  // claim: every stored item must come through unchanged, a claim taken
  // before the upgrade must still complete with its token, and no id may be
  // given twice (the AUTOINCREMENT counter carried over past deleted items).
  from0005To0006(backend)
  // 0007 adds the history columns and backfills them: finished items are
  // dated by their last update, a last error becomes the first attempt error.
  // A claim taken before the upgrade completes with its token and is kept as
  // done with its result; everything else still runs.
  from0006(backend)
  // 0009 adds a table only: items and claims are untouched; a retry after it counts.
  from0008(backend)
  // 0011 moves done items out of docket_items on PostgreSQL (a view reads
  // both tables); on SQLite it only adds the view. Either way every row reads
  // back as it was, and a worker of the release before can still complete.
  from0010(backend)
}
