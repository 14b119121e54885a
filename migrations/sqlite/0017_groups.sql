-- Groups of a kind (issue 36): as migrations/pg/0017_groups.sql, which says
-- why. An item's group is group_key (GROUP is a reserved word); a kind's
-- group limits are in docket_kinds. The claim itself is in
-- src/internal/sql/claimGroups.ts: SQLite has no functions, and a grouped
-- kind is claimed in the BEGIN IMMEDIATE transaction that limited kinds take
-- (one writer at a time across every process on the file, so no two claims
-- can read one group's count before either commits). Ungrouped items are in
-- none of the new indexes.
ALTER TABLE docket_items ADD COLUMN group_key TEXT;

ALTER TABLE docket_kinds ADD COLUMN group_concurrency INTEGER CHECK (group_concurrency >= 1);
ALTER TABLE docket_kinds ADD COLUMN group_ordered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE docket_kinds ADD COLUMN group_cursor TEXT;

CREATE INDEX docket_items_group ON docket_items (kind, group_key, id)
  WHERE group_key IS NOT NULL AND state IN ('waiting', 'running');
CREATE INDEX docket_items_group_running ON docket_items (kind, group_key)
  WHERE group_key IS NOT NULL AND state = 'running';
CREATE INDEX docket_items_group_due ON docket_items (kind, group_key, priority DESC, run_at, id)
  WHERE group_key IS NOT NULL AND state = 'waiting';
