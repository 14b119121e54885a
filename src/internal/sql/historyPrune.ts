/**
 * Prune: deletes the finished items of one state whose retention has passed
 * (finished_at at least the retention ago, database clock), the oldest first,
 * at most a batch per statement: the pruner (internal/worker/pruner.ts) runs
 * it again while batches come back full, so no statement holds its locks (or,
 * on SQLite, the write lock) for long.
 *
 * Walks docket_items_finished (state, finished_at, id) ascending
 * (migrations/pg/0007_history.sql), and on PostgreSQL docket_done_finished
 * for done items (0011).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { pgAdd, sqliteCounting } from "./counts.js"
import { op } from "./db.js"

/** The operation: deletes at most `limit` items of `state` finished at least `retentionMs` ago, oldest first; how many. */
export type HistoryPrune = (state: "done" | "dead" | "cancelled", retentionMs: number, limit: number) => Effect.Effect<number, SqlError>

/**
 * PostgreSQL: a DELETE (a CTE body, aliased d) of at most `limit` rows of
 * `table` that `where` selects (aliased x), walked in `order`; each returns
 * `returning`. The walk locks each row FOR UPDATE SKIP LOCKED: two pruners
 * (every pool runs one) never take the same row and never wait for each
 * other, and a row a person's retry or delete holds is left for the next
 * pass. Finished rows are not rows a claim or an outcome write ever locks, so
 * a prune never delays one.
 *
 * The DELETE finds the rows by the physical addresses (ctid) the walk
 * returns: a row this statement has locked cannot be updated or deleted by
 * anyone else, so its address stays put until the DELETE. Found by id instead
 * (`id IN (SELECT ...)`), the planner joined the batch to the table, by a
 * sequential scan of it below a few hundred thousand rows and by a key probe
 * a row above: 9.6 ms per 1,000 rows on 100,000 expired done rows and 11.4 on
 * 1,000,000, against 3.2 and 6.1 by address (docs/benchmarks.md, "The cost of
 * history").
 */
export const pgDeleteLocked = (table: string, where: string, order: string, limit: string, returning: string) => `
  DELETE FROM ${table} d
  WHERE d.ctid = ANY(ARRAY(
    SELECT x.ctid FROM ${table} x
    WHERE ${where}
    ORDER BY ${order}
    LIMIT ${limit}
    FOR UPDATE SKIP LOCKED))
  RETURNING ${returning}`

/** PostgreSQL: the rows of docket_items (x) finished in `state` at least `retention` ms ago (both SQL expressions). */
const expiredInItems = (state: string, retention: string) =>
  `x.state = ${state} AND x.finished_at IS NOT NULL AND x.finished_at <= ${Now.pg} - ${retention}::bigint`

/**
 * PostgreSQL: $1 the state, $2 the retention in ms, $3 the batch size; one row
 * with the count deleted.
 */
export const pg = `
WITH gone AS (${pgDeleteLocked("docket_items", expiredInItems("$1", "$2"), "x.finished_at, x.id", "$3", "d.kind, 1 AS n")}
), ${pgAdd("counted", "gone", "$1::text")}
SELECT count(*) AS n FROM gone`

/**
 * PostgreSQL, done items: $1 the retention in ms, $2 the batch size; one row
 * with the count deleted. Done items live in docket_done (0011), walked by
 * docket_done_finished; a worker of the release before 0011 still marks them
 * done in docket_items during a rolling upgrade, so those are pruned too (an
 * empty range of docket_items_finished once every worker is upgraded). At
 * most a batch from each table.
 */
export const pgDone = `
WITH gone AS (${
  pgDeleteLocked("docket_done", `x.finished_at <= ${Now.pg} - $1::bigint`, "x.finished_at, x.id", "$2", "d.kind, 1 AS n")
}
), gone_in_place AS (${pgDeleteLocked("docket_items", expiredInItems("'done'", "$1"), "x.finished_at, x.id", "$2", "d.kind, 1 AS n")}
), both_tables AS (
  SELECT kind, n FROM gone UNION ALL SELECT kind, n FROM gone_in_place
), ${pgAdd("counted", "both_tables", "'done'")}
SELECT count(*) AS n FROM both_tables`

/**
 * SQLite: ?1 the state, ?2 the retention in ms, ?3 the batch size; the kind of
 * each item deleted (counted by counts.sqliteCounting in the same transaction).
 */
export const sqlite = `
DELETE FROM docket_items
WHERE id IN (
  SELECT i.id FROM docket_items i
  WHERE i.state = ?1 AND i.finished_at IS NOT NULL AND i.finished_at <= ${Now.sqlite} - ?2
  ORDER BY i.finished_at, i.id
  LIMIT ?3)
RETURNING kind`

/** `historyPrune` for a dialect. */
export const make = op<HistoryPrune>({
  pg: ({ run }) => (state, retentionMs, limit) =>
    (state === "done"
      ? run<{ n: number | string }>(pgDone, [retentionMs, limit])
      : run<{ n: number | string }>(pg, [state, retentionMs, limit])
    ).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))),
  sqlite: (db) => (state, retentionMs, limit) =>
    sqliteCounting(db, db.run<{ kind: string }>(sqlite, [state, retentionMs, limit]), state)
      .pipe(Effect.map((rows) => rows.length))
})
