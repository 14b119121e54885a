-- Control from outside the code (migrations/pg/0006_control.sql says what
-- each part is for; the SQLite claim obeys the controls in the dialect's
-- claim transaction, src/internal/sql/claimAcquire.ts, instead of a function).
--
-- SQLite cannot change a column's CHECK in place, so docket_items is rebuilt
-- with the two new states ('cancelled', and 'done' reserved for the history)
-- and the snoozes column, as SQLite's documentation prescribes: a new table,
-- the rows copied, the old table dropped, the new one renamed, its indexes
-- made again. The whole migration is one transaction (the migrator's): no
-- other process sees a half-built table. The AUTOINCREMENT counter is carried
-- over, so no id is ever given twice (a stale worker's token names an id: a
-- reused id could let it change a newer item).
CREATE TABLE docket_items_v6 (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  kind               TEXT    NOT NULL,
  payload            TEXT    NOT NULL,
  dedupe_key         TEXT,
  priority           INTEGER NOT NULL DEFAULT 0,
  state              TEXT    NOT NULL DEFAULT 'waiting'
                             CHECK (state IN ('waiting', 'running', 'dead', 'cancelled', 'done')),
  run_at             INTEGER NOT NULL,
  attempts           INTEGER NOT NULL DEFAULT 0,
  max_attempts       INTEGER NOT NULL DEFAULT 8 CHECK (max_attempts >= 1),
  last_error         TEXT,
  claimed_by         TEXT,
  lease_until        INTEGER,
  lease_seq          INTEGER NOT NULL DEFAULT 0,
  created_at         INTEGER NOT NULL,
  updated_at         INTEGER NOT NULL,
  max_attempts_given INTEGER NOT NULL DEFAULT 1,
  trace_context      TEXT,
  snoozes            INTEGER NOT NULL DEFAULT 0
);

INSERT INTO docket_items_v6 (id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts,
  last_error, claimed_by, lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context)
SELECT id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts,
  last_error, claimed_by, lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context
FROM docket_items;

DELETE FROM sqlite_sequence WHERE name = 'docket_items_v6';

INSERT INTO sqlite_sequence (name, seq) SELECT 'docket_items_v6', seq FROM sqlite_sequence WHERE name = 'docket_items';

DROP TABLE docket_items;

ALTER TABLE docket_items_v6 RENAME TO docket_items;

CREATE UNIQUE INDEX docket_items_waiting_key ON docket_items (kind, dedupe_key)
  WHERE state = 'waiting' AND dedupe_key IS NOT NULL;

CREATE INDEX docket_items_claim ON docket_items (priority DESC, run_at, id)
  WHERE state = 'waiting';

CREATE INDEX docket_items_lease ON docket_items (lease_until) WHERE state = 'running';

CREATE INDEX docket_items_running_key ON docket_items (kind, dedupe_key)
  WHERE state = 'running' AND dedupe_key IS NOT NULL;

CREATE INDEX docket_items_dead ON docket_items (kind, id) WHERE state = 'dead';

CREATE INDEX docket_items_scheduled ON docket_items (run_at)
  WHERE state = 'waiting' AND run_at > created_at;

CREATE INDEX docket_items_cancelled ON docket_items (kind, id) WHERE state = 'cancelled';

CREATE TABLE docket_kinds (
  kind           TEXT    PRIMARY KEY,
  paused         INTEGER NOT NULL DEFAULT 0,
  concurrency    INTEGER CHECK (concurrency >= 1),
  rate_limit     INTEGER CHECK (rate_limit >= 1),
  rate_period_ms INTEGER CHECK (rate_period_ms >= 1),
  limits_set_by  TEXT    NOT NULL DEFAULT 'code' CHECK (limits_set_by IN ('code', 'person')),
  updated_at     INTEGER NOT NULL,
  CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

CREATE TABLE docket_kind_slots (
  kind       TEXT    NOT NULL REFERENCES docket_kinds (kind) ON DELETE CASCADE,
  slot       INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  PRIMARY KEY (kind, slot)
);

CREATE TABLE docket_workers (
  id           TEXT    PRIMARY KEY,
  name         TEXT    NOT NULL,
  host         TEXT    NOT NULL,
  pid          INTEGER NOT NULL,
  kinds        TEXT,
  concurrency  INTEGER NOT NULL,
  running      INTEGER NOT NULL DEFAULT 0,
  version      TEXT    NOT NULL,
  started_at   INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL
);
