-- As migrations/pg/0004_scheduled_index.sql: the next-due index keeps only
-- items scheduled for later than they were enqueued (run_at > created_at), so
-- an item enqueued due at once costs one index insertion fewer. Such an item
-- has run_at = created_at (one clock reading per statement) and is the claim's;
-- the pool reads the next due time only to sleep until an item not yet due,
-- which always has run_at > now >= created_at.
--
-- As on PostgreSQL, it assumes the clock does not step backwards (see there).
CREATE INDEX docket_items_scheduled ON docket_items (run_at)
  WHERE state = 'waiting' AND run_at > created_at;

DROP INDEX docket_items_next;
