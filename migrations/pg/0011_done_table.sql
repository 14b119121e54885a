-- Done items move to a table of their own (issue 17's cost of history).
--
-- Until 0010 a completed item stayed in docket_items as 'done': an UPDATE.
-- Every partial index of the queue reads `state`, so that UPDATE can never be
-- a HOT update: PostgreSQL writes a new row version and a new entry in the
-- primary key (whose uniqueness check visits the old version) and in
-- docket_items_finished, where a DELETE only marks the row. Measured on
-- 100,000 running rows completed 1,000 a statement (one session, medians of
-- 3): delete 0.84 s, mark done in place 2.37 s, delete and insert into this
-- table (its primary key and finished index) 1.45-1.67 s. In bench W2 (20,000
-- no-op jobs, pairs alternated, this machine) keeping done items in place
-- ran at 0.84-0.87 (1 worker process) of deleting them; moving them here at
-- 0.80-0.92 on a quiet machine (1 and 2 processes, 20,000 and 100,000 jobs;
-- docs/benchmarks.md, "The cost of history").
--
-- Complete (retention of done items above 0) is now one statement:
--   WITH d AS (DELETE FROM docket_items ... RETURNING ...) INSERT INTO docket_done ...
-- atomic like any statement: an item is in exactly one of the two tables.
-- Dead and cancelled items stay in docket_items (a person retries or deletes
-- them there, and they are few); a retried dead item keeps its history there.
--
-- docket_done holds the columns of docket_items in the same order, so the
-- view below can put them one under the other; a later migration that adds a
-- column to docket_items adds it here too and makes the view again.
CREATE TABLE docket_done (
  id                 bigint  PRIMARY KEY,
  kind               text    NOT NULL,
  payload            text    NOT NULL,
  dedupe_key         text,
  priority           integer NOT NULL,
  state              text    NOT NULL DEFAULT 'done' CHECK (state = 'done'),
  run_at             bigint  NOT NULL,
  attempts           integer NOT NULL,
  max_attempts       integer NOT NULL,
  last_error         text,
  claimed_by         text,
  lease_until        bigint,
  lease_seq          bigint  NOT NULL,
  created_at         bigint  NOT NULL,
  updated_at         bigint  NOT NULL,
  max_attempts_given boolean NOT NULL,
  trace_context      text,
  snoozes            integer NOT NULL,
  finished_at        bigint  NOT NULL,
  result             text,
  errors             jsonb
);

-- Pruning walks it ascending (the oldest first, 1,000 a statement), `docket
-- list --state done` descending from the cursor's key, and the dashboard's
-- finished-per-minute reads the last hour's range. Rows arrive in finish
-- order, so each insert lands at the right edge of this index and of the
-- primary key (ids are given in enqueue order, which is nearly finish order).
-- A BRIN index would be cheaper to write, but pruning frees pages that later
-- rows fill, so its ranges would soon each span every age and match every
-- query.
CREATE INDEX docket_done_finished ON docket_done (finished_at, id);

-- Done items a database already holds move now, so every done item is in one
-- place. (A worker of the release before this one that completes an item
-- while others are upgraded still marks it done in docket_items; the view
-- and the pruner read both tables, so such items are listed and pruned too.)
WITH moved AS (
  DELETE FROM docket_items WHERE state = 'done'
  RETURNING id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error,
    claimed_by, lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context, snoozes,
    coalesce(finished_at, updated_at) AS finished_at, result, errors
)
INSERT INTO docket_done SELECT * FROM moved;

-- Every item whatever its state: what reads by id, lists, counts and searches
-- select from. docket_done's CHECK lets the planner leave its half out of a
-- query for another state (constraint_exclusion = partition, the default,
-- covers UNION ALL), and an ORDER BY ... LIMIT over both halves is a merge of
-- two index scans.
CREATE VIEW docket_items_all AS
  SELECT id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error, claimed_by,
    lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context, snoozes, finished_at,
    result, errors
  FROM docket_items
  UNION ALL
  SELECT id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error, claimed_by,
    lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context, snoozes, finished_at,
    result, errors
  FROM docket_done;
