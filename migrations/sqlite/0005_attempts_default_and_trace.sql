-- As migrations/pg/0005_attempts_default_and_trace.sql (read the comments
-- there): max_attempts_given (1: the enqueue gave max_attempts; 0: the worker
-- that claims the item decides, from its handler, and max_attempts holds 8 for
-- workers of earlier versions) and trace_context (the enqueuer's W3C
-- traceparent, or NULL). Adding a column with a constant default rewrites
-- nothing: existing rows read the default (given: they keep their budget).
ALTER TABLE docket_items ADD COLUMN max_attempts_given INTEGER NOT NULL DEFAULT 1;

ALTER TABLE docket_items ADD COLUMN trace_context TEXT;
