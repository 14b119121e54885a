-- Counts of what left the store, for /metrics' counters
-- (migrations/pg/0012_counts.sql says why and what is counted).
CREATE TABLE docket_counts (
  kind TEXT    NOT NULL,
  what TEXT    NOT NULL CHECK (what IN ('done', 'dead', 'cancelled', 'retried')),
  n    INTEGER NOT NULL CHECK (n >= 0),
  PRIMARY KEY (kind, what)
) WITHOUT ROWID;
