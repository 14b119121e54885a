-- Nothing on PostgreSQL: migrations/sqlite/0013_claim_skip_scan.sql gives
-- SQLite's planner the statistic that lets its claim skip the waiting items
-- not yet due (a skip-scan of the claim index). PostgreSQL 15 has no skip
-- scan (PostgreSQL 18 has one): here a claim that finds fewer due items than
-- its batch still walks the items not yet due behind them, 26 ms per
-- 1,000,000 such items on the development machine (docs/operations.md,
-- "Many items scheduled for later"). The number is kept so both dialects'
-- migrations have the same numbers.
SELECT 1;
