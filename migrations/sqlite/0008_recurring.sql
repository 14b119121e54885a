-- Recurring items (docs/concepts.md, "Recurring items"): one row per schedule
-- a worker pool declared, by name. Number 0008: 0007 (history) comes from
-- another branch; the migrator applies files by number and tolerates a gap.
--
-- Exactly once per tick without a leader: a pool enqueues the items of the
-- ticks due since next_tick by advancing next_tick with a compare-and-set
--   UPDATE ... SET next_tick = <after them> WHERE name = $ AND next_tick = <read>
-- and inserting the items in the same transaction only when that row came
-- back. Two pools racing for one tick both run the UPDATE: the second waits
-- for the first's row lock, re-reads the row, finds next_tick moved and
-- changes nothing. (On SQLite the writers are serialised: the second UPDATE
-- runs after the first committed and matches no row.) No lock is held between ticks (a dedupe key alone would not
-- do: it stops blocking once the tick's item runs).
--   name: the schedule's name (as a kind: letters, digits and _ . : -).
--   kind, cron, tz, payload (JSON text), missed: the latest declaration; every
--     pool ticks the row's version, so pools of two releases agree on a tick.
--   tz: an IANA time zone the cron expression is read in, NULL for UTC.
--   missed: what a pool starting after a stop (declared_at stale) enqueues for
--     the ticks due while no pool ran: 'skip' none, 'one' the latest, 'all'
--     each of them (the 1,000 most recent).
--   next_tick: the first tick not yet enqueued (epoch ms, UTC).
--   last_tick, last_item_id: the latest tick enqueued and its item (the item
--     is not a foreign key: a finished item may be deleted).
--   declared_at: when a declaring pool last touched the row (every 5 s and at
--     each tick, database clock). Older than 15 s: the schedule is "stopped",
--     declared by no live pool, and nobody ticks it.
-- A few rows, each written about once a tick: no index besides the key.
CREATE TABLE docket_schedules (
  name         TEXT   PRIMARY KEY,
  kind         TEXT   NOT NULL,
  cron         TEXT   NOT NULL,
  tz           TEXT,
  payload      TEXT   NOT NULL,
  missed       TEXT   NOT NULL CHECK (missed IN ('skip', 'one', 'all')),
  next_tick    INTEGER NOT NULL,
  last_tick    INTEGER,
  last_item_id INTEGER,
  declared_at  INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL
);
