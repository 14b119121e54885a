-- Retries per minute (migrations/pg/0009_minute_counts.sql says why a table
-- and what it costs): one row per epoch minute (database clock, ms / 60000)
-- and kind, with the attempts of that kind that failed and went back to
-- waiting in that minute. Written by fail in its transaction (a statement
-- after the update, only for the rows it changed), pruned after a day.
CREATE TABLE docket_minute_counts (
  minute  INTEGER NOT NULL,
  kind    TEXT    NOT NULL,
  retried INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, kind)
) WITHOUT ROWID;
