-- History: a finished item is kept for a while instead of deleted, with what
-- its attempts did (docs/concepts.md, "States, retention and history";
-- docs/operations.md, "Retention and pruning").
--
-- State 'done' was reserved by 0006 (its CHECK allows it already): a completed
-- item becomes 'done' and stays until its retention passes, when a worker's
-- pruner deletes it. A retention of 0 for done items keeps the old behaviour:
-- complete deletes the row at once.
--
--   finished_at: when the item became done, dead or cancelled (database clock,
--     epoch ms); NULL while it can still run. Retention is counted from it, and
--     a listing of finished items is ordered by it (newest first).
--   result: what the handler returned, as JSON text (its `result` Schema's
--     encoding, or a plain task's JSON value); NULL when it returned none.
--     Text, not jsonb: it is written once, read whole and never queried into,
--     so jsonb's parse on write would cost the hot complete for nothing.
--   errors: every attempt's error, the last 20, as a jsonb array of
--     {attempt, at, worker, error}; last_error stays the newest one's text (for
--     the release before this one, and for the handler's job.lastError).
--     jsonb, not text: fail appends to it in SQL (`||`, `- 0` drops the oldest)
--     without reading it back into the worker.
-- Adding nullable columns without a default changes only the catalogue: no
-- table rewrite, no long lock.
ALTER TABLE docket_items ADD COLUMN finished_at bigint;
ALTER TABLE docket_items ADD COLUMN result text;
ALTER TABLE docket_items ADD COLUMN errors jsonb;

-- Backfill: the items already finished (dead, cancelled) finished at their
-- last update, so they are listed and pruned like the ones finished later;
-- their last error becomes their first (and only known) attempt error, by
-- the worker unknown. Only those rows are rewritten.
UPDATE docket_items SET finished_at = updated_at WHERE state IN ('dead', 'cancelled');
UPDATE docket_items
SET errors = jsonb_build_array(jsonb_build_object(
  'attempt', attempts, 'at', updated_at, 'worker', NULL, 'error', last_error))
WHERE last_error IS NOT NULL;

-- The finished items by state and age: the pruner walks it ascending (the
-- oldest of a state first, at most 1,000 a statement), and `docket list
-- --state done|dead|cancelled` walks it descending (newest first, with the
-- cursor's (finished_at, id) as the start key). Partial: waiting and running
-- rows are not in it, so an enqueue or a claim never writes it; only the
-- statements that finish an item (complete, fail to dead, cancel) add an
-- entry, and prune removes it.
--
-- Why done rows do not slow the claim: the claim walks docket_items_claim,
-- partial on state = 'waiting', and the expired-lease look-up walks
-- docket_items_lease, partial on state = 'running'. A completed row leaves
-- both at once (its state changes) and never enters them again, so however
-- many done rows are kept, the claim's walk sees only waiting (or running)
-- entries. What the kept rows cost is space and vacuum: each complete now
-- updates the row instead of deleting it, and each prune deletes it later, so
-- the table carries dead tuples from both; autovacuum must keep up
-- (docs/operations.md gives the settings for docket_items).
--
-- Built in this migration's transaction (not CONCURRENTLY, which cannot run
-- in one): it reads the whole table once; only dead and cancelled rows enter.
CREATE INDEX docket_items_finished ON docket_items (state, finished_at, id) WHERE finished_at IS NOT NULL;
