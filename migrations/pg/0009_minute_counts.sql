-- Retries per minute (docs/dashboard.md, "The throughput chart"): how many
-- failed attempts of each kind went back to waiting in each minute, for the
-- dashboard's retried series and /metrics' docket_retried_last_hour.
--
-- Why a table: a retry leaves no row of its own (the item goes back to
-- waiting, its row rewritten), so there is nothing to count by time but the
-- items' `errors` arrays, and counting those would read every item. An index
-- on updated_at would make the count a range read, but every write of an item
-- (enqueue, claim, complete, renewal) changes updated_at and would write that
-- index too: the hot path would pay for a chart. Here only a fail that
-- schedules a retry writes, in its own statement (sql/claimFail.ts: a CTE of the
-- fail that upserts one row per kind of the batch, counting only the rows the
-- fenced fail changed). Dead, cancelled, snoozed and completed items never
-- write it: done, dead and cancelled per minute are read from the history
-- (docket_items_finished).
--
--   minute: the epoch minute of the retry (database clock, ms / 60000).
--   kind: the item's kind.
--   retried: the attempts of that kind that failed and went back to waiting
--     (or were absorbed by a waiting twin, which runs the work again) in that
--     minute.
--
-- Cost: at most one row per kind and minute with a retry (a day of one kind
-- retrying every minute is 1,440 rows of a few dozen bytes), and one upsert
-- per kind per failing batch. Concurrent fail batches of one kind in one minute
-- update the same row, so they queue on its row lock for the rest of their
-- statement (kinds are upserted in kind order: two batches never deadlock).
-- The pruner deletes rows older than a day, a batch at a time
-- (sql/historyPruneMinuteCounts.ts). The primary key is the only index: the read is a range of
-- minutes, the pruner's delete the oldest minutes.
CREATE TABLE docket_minute_counts (
  minute  bigint NOT NULL,
  kind    text   NOT NULL,
  retried bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, kind)
);
