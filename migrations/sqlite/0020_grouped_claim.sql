-- Grouped items out of the general claim (issue 36, "Speed"), as on
-- PostgreSQL (migrations/pg/0020_grouped_claim.sql says why): the claim index
-- holds only ungrouped waiting items, the general claim reads only those, and
-- every grouped item is claimed by the grouped claim
-- (src/internal/sql/claimGroups.ts), which walks the groups through
-- docket_items_group and docket_items_group_due. Before, a claim that asked
-- for more than the grouped kinds gave read past every waiting grouped item
-- in docket_items_claim, one row at a time.
--
-- During an upgrade, a process of the release before still sends its own
-- claim text, without `group_key IS NULL`: the new index does not serve it,
-- so its claims read the table until it restarts (PostgreSQL's processes call
-- the replaced functions and claim as the new release does). It still obeys
-- perGroup: its own read of the controlled kinds leaves those kinds out.
DROP INDEX docket_items_claim;
CREATE INDEX docket_items_claim ON docket_items (priority DESC, run_at, id)
  WHERE state = 'waiting' AND group_key IS NULL;

-- The new index's statistic, as 0013 wrote it for the old one (the claim's
-- skip-scan by priority depends on it; 0013 says why).
ANALYZE sqlite_schema;
DELETE FROM sqlite_stat1 WHERE tbl = 'docket_items' AND idx = 'docket_items_claim';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('docket_items', 'docket_items_claim', '1000000 100000 2 1');
ANALYZE sqlite_schema;
