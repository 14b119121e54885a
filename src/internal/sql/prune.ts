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
import * as Now from "./clock.js"
import { pgAdd } from "./counts.js"

/**
 * PostgreSQL: $1 the state, $2 the retention in ms, $3 the batch size; one row
 * with the count deleted. FOR UPDATE SKIP LOCKED: two pruners (every pool runs
 * one) never take the same row and never wait for each other, and a row a
 * person's retry or delete holds is left for the next pass. Finished rows are
 * not rows a claim or an outcome write ever locks, so a prune never delays one.
 *
 * The DELETE finds the rows by the physical addresses (ctid) the locking
 * SELECT returns: a row this statement has locked cannot be updated or
 * deleted by anyone else, so its address stays put until the DELETE. Found by
 * id instead (`id IN (SELECT ...)`), the planner joined the batch to the
 * table, by a sequential scan of it while it was small (below a few hundred
 * thousand rows) and by a primary-key probe a row above: 9.0 ms per 1,000
 * rows on 100,000 done rows and 6.0 on 400,000, against 3.4-3.6 by address
 * (docs/benchmarks.md, "The cost of history").
 */
export const pg = `
WITH gone AS (
  DELETE FROM docket_items d
  WHERE d.ctid = ANY(ARRAY(
    SELECT i.ctid FROM docket_items i
    WHERE i.state = $1 AND i.finished_at IS NOT NULL AND i.finished_at <= ${Now.pg} - $2::bigint
    ORDER BY i.finished_at, i.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED))
  RETURNING d.kind, 1 AS n
), ${pgAdd("counted", "gone", "$1::text")}
SELECT count(*) AS n FROM gone`

/**
 * PostgreSQL, done items: $1 the retention in ms, $2 the batch size; one row
 * with the count deleted. Done items live in docket_done (0011), walked by
 * docket_done_finished; a worker of the release before 0011 still marks them
 * done in docket_items during a rolling upgrade, so those are pruned too (an
 * empty range of docket_items_finished once every worker is upgraded). At
 * most a batch from each table. Rows found by address, as above.
 */
export const pgDone = `
WITH gone AS (
  DELETE FROM docket_done d
  WHERE d.ctid = ANY(ARRAY(
    SELECT x.ctid FROM docket_done x
    WHERE x.finished_at <= ${Now.pg} - $1::bigint
    ORDER BY x.finished_at, x.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED))
  RETURNING d.kind, 1 AS n
), gone_in_place AS (
  DELETE FROM docket_items d
  WHERE d.ctid = ANY(ARRAY(
    SELECT i.ctid FROM docket_items i
    WHERE i.state = 'done' AND i.finished_at IS NOT NULL AND i.finished_at <= ${Now.pg} - $1::bigint
    ORDER BY i.finished_at, i.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED))
  RETURNING d.kind, 1 AS n
), both_tables AS (
  SELECT kind, n FROM gone UNION ALL SELECT kind, n FROM gone_in_place
), ${pgAdd("counted", "both_tables", "'done'")}
SELECT count(*) AS n FROM both_tables`

/**
 * SQLite: ?1 the state, ?2 the retention in ms, ?3 the batch size; the kind of
 * each item deleted (counted by counts.sqliteAdd in the same transaction).
 */
export const sqlite = `
DELETE FROM docket_items
WHERE id IN (
  SELECT i.id FROM docket_items i
  WHERE i.state = ?1 AND i.finished_at IS NOT NULL AND i.finished_at <= ${Now.sqlite} - ?2
  ORDER BY i.finished_at, i.id
  LIMIT ?3)
RETURNING kind`

/**
 * The retry counts per minute (docket_minute_counts, migration 0009) older
 * than the window they are kept for, the oldest minutes first, at most a
 * batch per statement (its primary key walked from the oldest minute).
 * PostgreSQL: $1 the window in ms, $2 the batch size; one row with the count
 * deleted. SKIP LOCKED: a row a fail is counting into (the current minute,
 * never this old) or another pruner holds is left for the next pass. Rows
 * found by address, as above.
 */
export const pgMinuteCounts = `
WITH gone AS (
  DELETE FROM docket_minute_counts d
  WHERE d.ctid = ANY(ARRAY(
    SELECT c.ctid FROM docket_minute_counts c
    WHERE c.minute < (${Now.pg} - $1::bigint) / 60000
    ORDER BY c.minute, c.kind
    LIMIT $2
    FOR UPDATE SKIP LOCKED))
  RETURNING d.kind, d.retried AS n
), ${pgAdd("counted", "gone", "'retried'")}
SELECT count(*) AS n FROM gone`

/** SQLite: ?1 the window in ms, ?2 the batch size; a row (kind, retried) per count deleted. */
export const sqliteMinuteCounts = `
DELETE FROM docket_minute_counts
WHERE (minute, kind) IN (
  SELECT c.minute, c.kind FROM docket_minute_counts c
  WHERE c.minute < (${Now.sqlite} - ?1) / 60000
  ORDER BY c.minute, c.kind
  LIMIT ?2)
RETURNING kind, retried`
