-- The claim skips the waiting items that are not yet due (issue 19, W6).
--
-- The claim's scan of waiting items walks docket_items_claim (priority DESC,
-- run_at, id) for items with run_at <= now. With no constraint on priority,
-- the first column, SQLite could not bound the walk by run_at: a claim that
-- found fewer due items than its batch walked on through every item not yet
-- due behind them. Measured on 1,000,000 items due in a day: an empty claim
-- (an idle worker's poll, or the last claims of a drain) 54 ms, the bench's W6
-- drain 0.74x of W2 (its last claims 46-64 ms each, against 0.4-0.6 ms with
-- no backlog).
--
-- SQLite's skip-scan walks such an index one priority at a time (a seek to
-- the next priority, then the range run_at <= now within it), in the index's
-- order, so the claim's ORDER BY ... LIMIT still stops at the batch. The
-- planner takes it only when sqlite_stat1 says the first column repeats (at
-- least 18 rows per value), and Docket runs no ANALYZE, so this row says so:
-- about 100,000 items per priority, 2 per (priority, run_at), one per id.
-- SQLite documents writing sqlite_stat1 by hand for exactly this. Measured
-- on the same file: the empty claim 0.15 ms (SEARCH ... USING INDEX
-- docket_items_claim (ANY(priority) AND run_at<?)). Only this index gets a
-- row: every other plan is as before. An ANALYZE of the application's own
-- replaces the row with measured figures (with few distinct priorities, as
-- usual, they also make it skip-scan).
--
-- `ANALYZE sqlite_schema` makes sqlite_stat1 if the file has none and, run
-- again at the end, makes this connection's planner read the new row (other
-- connections read it when they open the file).
ANALYZE sqlite_schema;
DELETE FROM sqlite_stat1 WHERE tbl = 'docket_items' AND idx = 'docket_items_claim';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('docket_items', 'docket_items_claim', '1000000 100000 2 1');
ANALYZE sqlite_schema;
