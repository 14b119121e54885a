-- History (migrations/pg/0007_history.sql says what each column and the index
-- are for, and why kept done rows do not slow the claim: its index is partial
-- on state = 'waiting', which a done row never is).
--
-- SQLite adds a column in place (no rebuild: 0006 already allows 'done').
--   finished_at: when the item became done, dead or cancelled (epoch ms).
--   result: the handler's result as JSON text, NULL for none.
--   errors: the attempts' errors, the last 20, as a JSON array in TEXT of
--     {attempt, at, worker, error} (SQLite's json functions append to it).
ALTER TABLE docket_items ADD COLUMN finished_at INTEGER;
ALTER TABLE docket_items ADD COLUMN result TEXT;
ALTER TABLE docket_items ADD COLUMN errors TEXT;

-- Backfill, as on PostgreSQL: finished items finished at their last update;
-- the last error becomes the one known attempt error.
UPDATE docket_items SET finished_at = updated_at WHERE state IN ('dead', 'cancelled');
UPDATE docket_items
SET errors = json_array(json_object('attempt', attempts, 'at', updated_at, 'worker', NULL, 'error', last_error))
WHERE last_error IS NOT NULL;

-- Pruning (ascending) and listing finished items (descending), by state and age.
CREATE INDEX docket_items_finished ON docket_items (state, finished_at, id) WHERE finished_at IS NOT NULL;
