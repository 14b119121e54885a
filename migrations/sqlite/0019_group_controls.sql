-- Groups of a kind, the claim's side (issue 36): a group paused, what a
-- failure and a dead item do to their group, a per-group rate, a person's
-- setting of the group limits. migrations/pg/0019_group_controls.sql says
-- why each is stored as it is; the SQLite claim (src/internal/sql/claimGroups.ts)
-- reads them inside its BEGIN IMMEDIATE transaction, so every process on the
-- file obeys them exactly.
ALTER TABLE docket_kinds ADD COLUMN paused_groups INTEGER NOT NULL DEFAULT 0;
ALTER TABLE docket_kinds ADD COLUMN group_on_failure TEXT NOT NULL DEFAULT 'wait'
  CHECK (group_on_failure IN ('wait', 'continue'));
ALTER TABLE docket_kinds ADD COLUMN group_on_dead TEXT NOT NULL DEFAULT 'release'
  CHECK (group_on_dead IN ('release', 'hold'));
-- Both or neither is checked by the statements that write them (SQLite cannot add a table CHECK).
ALTER TABLE docket_kinds ADD COLUMN group_rate_limit INTEGER CHECK (group_rate_limit >= 1);
ALTER TABLE docket_kinds ADD COLUMN group_rate_period_ms INTEGER CHECK (group_rate_period_ms >= 1);
ALTER TABLE docket_kinds ADD COLUMN group_limits_set_by TEXT NOT NULL DEFAULT 'code'
  CHECK (group_limits_set_by IN ('code', 'person'));

-- The paused groups: a row while the group is paused.
CREATE TABLE docket_groups (
  kind      TEXT    NOT NULL,
  group_key TEXT    NOT NULL,
  paused_at INTEGER NOT NULL,
  PRIMARY KEY (kind, group_key)
);

-- A rate-limited group's starts of the last period (older ones are deleted at its next claim).
CREATE TABLE docket_group_starts (
  kind       TEXT    NOT NULL,
  group_key  TEXT    NOT NULL,
  started_at INTEGER NOT NULL
);
CREATE INDEX docket_group_starts_group ON docket_group_starts (kind, group_key, started_at);

-- A group's dead items (onDead 'hold').
CREATE INDEX docket_items_group_dead ON docket_items (kind, group_key)
  WHERE group_key IS NOT NULL AND state = 'dead';
