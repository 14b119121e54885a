/**
 * Prune: deletes the finished items of one state whose retention has passed
 * (finished_at at least the retention ago, database clock), the oldest first,
 * at most a batch per statement: the pruner (internal/worker/pruner.ts) runs
 * it again while batches come back full, so no statement holds its locks (or,
 * on SQLite, the write lock) for long.
 *
 * Walks docket_items_finished (state, finished_at, id) ascending
 * (migrations/pg/0007_history.sql).
 */
import * as Now from "./clock.js"

/**
 * PostgreSQL: $1 the state, $2 the retention in ms, $3 the batch size; one row
 * with the count deleted. FOR UPDATE SKIP LOCKED: two pruners (every pool runs
 * one) never take the same row and never wait for each other, and a row a
 * person's retry or delete holds is left for the next pass. Finished rows are
 * not rows a claim or an outcome write ever locks, so a prune never delays one.
 */
export const pg = `
WITH gone AS (
  DELETE FROM docket_items d
  WHERE d.id IN (
    SELECT i.id FROM docket_items i
    WHERE i.state = $1 AND i.finished_at IS NOT NULL AND i.finished_at <= ${Now.pg} - $2::bigint
    ORDER BY i.finished_at, i.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
  RETURNING 1
)
SELECT count(*) AS n FROM gone`

/** SQLite: ?1 the state, ?2 the retention in ms, ?3 the batch size; the ids deleted. */
export const sqlite = `
DELETE FROM docket_items
WHERE id IN (
  SELECT i.id FROM docket_items i
  WHERE i.state = ?1 AND i.finished_at IS NOT NULL AND i.finished_at <= ${Now.sqlite} - ?2
  ORDER BY i.finished_at, i.id
  LIMIT ?3)
RETURNING id`
