-- Docket's queue table on SQLite: the same model as migrations/pg/0001_items.sql
-- (read the comments there). Times are milliseconds since the Unix epoch, read
-- from SQLite's clock.
--
-- AUTOINCREMENT matters: without it SQLite may reuse the id of a deleted (done)
-- item, and a stale claim (id, lease_seq) could then match a new item.
CREATE TABLE docket_items (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  kind         TEXT    NOT NULL,
  payload      TEXT    NOT NULL,
  dedupe_key   TEXT,
  priority     INTEGER NOT NULL DEFAULT 0,
  state        TEXT    NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'running', 'dead')),
  run_at       INTEGER NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL DEFAULT 8 CHECK (max_attempts >= 1),
  last_error   TEXT,
  claimed_by   TEXT,
  lease_until  INTEGER,
  lease_seq    INTEGER NOT NULL DEFAULT 0,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL
);

CREATE UNIQUE INDEX docket_items_waiting_key ON docket_items (kind, dedupe_key)
  WHERE state = 'waiting' AND dedupe_key IS NOT NULL;

CREATE INDEX docket_items_claim ON docket_items (priority DESC, run_at, id)
  WHERE state = 'waiting';

CREATE INDEX docket_items_next ON docket_items (run_at) WHERE state = 'waiting';

CREATE INDEX docket_items_lease ON docket_items (lease_until) WHERE state = 'running';

CREATE INDEX docket_items_running_key ON docket_items (kind, dedupe_key)
  WHERE state = 'running' AND dedupe_key IS NOT NULL;

CREATE INDEX docket_items_dead ON docket_items (kind, id) WHERE state = 'dead';
