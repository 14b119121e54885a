-- Docket's queue table on PostgreSQL.
--
-- Times are milliseconds since the Unix epoch (bigint), always read from the
-- database's clock (docket_now_ms), so worker machines with skewed clocks cannot
-- take a lease early or run an item before it is due.
--
-- state is what is stored: 'waiting' (due when run_at <= now), 'running'
-- (claimed; the lease holds while lease_until > now, after that the item is due
-- again) or 'dead' (kept for a person to read, retry or delete). Done items are
-- deleted.
--
-- lease_seq is the claim token: every claim increments it, and every change a
-- worker makes after its claim (complete, fail, release, extend) must present
-- it, so a worker whose lease was lost and whose item was claimed again changes
-- nothing.
CREATE FUNCTION docket_now_ms() RETURNS bigint
  LANGUAGE sql STABLE PARALLEL SAFE
  AS 'SELECT (extract(epoch FROM statement_timestamp()) * 1000)::bigint';

CREATE TABLE docket_items (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind         text    NOT NULL,
  payload      text    NOT NULL,
  dedupe_key   text,
  priority     integer NOT NULL DEFAULT 0,
  state        text    NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'running', 'dead')),
  run_at       bigint  NOT NULL,
  attempts     integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL DEFAULT 8 CHECK (max_attempts >= 1),
  last_error   text,
  claimed_by   text,
  lease_until  bigint,
  lease_seq    bigint  NOT NULL DEFAULT 0,
  created_at   bigint  NOT NULL,
  updated_at   bigint  NOT NULL
);

-- Dedupe: one WAITING item per kind and key. A running item does not hold its
-- key (an enqueue while it runs is kept and runs after it), nor does a dead one.
CREATE UNIQUE INDEX docket_items_waiting_key ON docket_items (kind, dedupe_key)
  WHERE state = 'waiting' AND dedupe_key IS NOT NULL;

-- The claim walks this index in claim order, so its cost does not grow with
-- the backlog.
CREATE INDEX docket_items_claim ON docket_items (priority DESC, run_at, id)
  WHERE state = 'waiting';

-- The next scheduled item, to wake the pool at its run-after time.
CREATE INDEX docket_items_next ON docket_items (run_at) WHERE state = 'waiting';

-- Expired leases (a worker died) and running keyed items (a waiting twin waits
-- for them to finish).
CREATE INDEX docket_items_lease ON docket_items (lease_until) WHERE state = 'running';
CREATE INDEX docket_items_running_key ON docket_items (kind, dedupe_key)
  WHERE state = 'running' AND dedupe_key IS NOT NULL;

CREATE INDEX docket_items_dead ON docket_items (kind, id) WHERE state = 'dead';
