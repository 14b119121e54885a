-- Control from outside the code: kinds a person pauses and limits, items a
-- person cancels, snoozes, and the live worker pools (docs/concepts.md,
-- "Control", says what each does; docs/operations.md how to use them).
--
-- Two more states. 'cancelled': a person (or the handler, with the Cancel
-- outcome) stopped the item; it is final, never retried, kept with its error.
-- 'done' is reserved for the history of items that ran (kept a while instead
-- of deleted), so that a later release adds no third change of this check.
-- The new check is a superset of the old one, so every stored row satisfies
-- it: NOT VALID skips the scan of the table (new rows are checked all the same).
ALTER TABLE docket_items DROP CONSTRAINT docket_items_state_check;
ALTER TABLE docket_items ADD CONSTRAINT docket_items_state_check
  CHECK (state IN ('waiting', 'running', 'dead', 'cancelled', 'done')) NOT VALID;

-- snoozes: how many times the item's handler put it back (the Snooze outcome),
-- not counted as attempts; capped, so nothing loops for ever.
ALTER TABLE docket_items ADD COLUMN snoozes integer NOT NULL DEFAULT 0;

CREATE INDEX docket_items_cancelled ON docket_items (kind, id) WHERE state = 'cancelled';

-- A kind an operator controls. A row exists only for a kind someone paused or
-- limited (or whose handler declares limits); a kind without one is neither.
--   paused: no worker starts an item of the kind (running ones finish).
--   concurrency: at most this many items of the kind hold a live lease at once,
--     across every process.
--   rate_limit per rate_period_ms: at most this many starts (claims) in any
--     window of that length, across every process (docket_kind_slots).
--   limits_set_by: 'code' (a handler's declaration, rewritten at each worker
--     start) or 'person' (docket kind set; kept until docket kind reset).
-- The claim locks the row of each limited kind it claims (FOR UPDATE), so
-- claims of one limited kind serialise; other kinds are not touched.
CREATE TABLE docket_kinds (
  kind           text    PRIMARY KEY,
  paused         boolean NOT NULL DEFAULT false,
  concurrency    integer CHECK (concurrency >= 1),
  rate_limit     integer CHECK (rate_limit >= 1),
  rate_period_ms bigint  CHECK (rate_period_ms >= 1),
  limits_set_by  text    NOT NULL DEFAULT 'code' CHECK (limits_set_by IN ('code', 'person')),
  updated_at     bigint  NOT NULL,
  CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

-- A rate-limited kind has exactly rate_limit slots, each holding the time of
-- one recent start. A claim of k items needs k slots whose start is at least
-- a period ago, and writes its time into the k oldest: a slot's successive
-- times are then at least a period apart, so no window of one period holds
-- more than one start per slot, rate_limit in all (exact, whatever the order
-- in which claimers commit).
CREATE TABLE docket_kind_slots (
  kind       text    NOT NULL REFERENCES docket_kinds (kind) ON DELETE CASCADE,
  slot       integer NOT NULL,
  started_at bigint  NOT NULL,
  PRIMARY KEY (kind, slot)
);

-- The live worker pools: each registers at start, heartbeats on the
-- database's clock, and removes its row at a graceful stop. A pool whose
-- heartbeat is older than a few intervals is shown as gone (it was killed or
-- cut off), and removed later by any other pool.
--   kinds: a JSON array of the kinds it claims, or NULL for every kind.
CREATE TABLE docket_workers (
  id           text    PRIMARY KEY,
  name         text    NOT NULL,
  host         text    NOT NULL,
  pid          integer NOT NULL,
  kinds        text,
  concurrency  integer NOT NULL,
  running      integer NOT NULL DEFAULT 0,
  version      text    NOT NULL,
  started_at   bigint  NOT NULL,
  heartbeat_at bigint  NOT NULL
);

-- The claim of 0002 over a set of kinds: the one statement every claim runs
-- (read 0002 for the plan and the two sources). With $5 it leaves out every
-- controlled kind (paused or limited), read by this statement itself: a kind
-- paused or limited after docket_claim looked (below) and before this
-- statement's snapshot is left out all the same, so no claim ever takes a
-- controlled kind unlimited. Without $5 it claims one limited kind, under the
-- lock of its row.
-- Arguments: worker, batch size, lease in ms, kinds (NULL for all), leave out
-- the controlled kinds.
CREATE FUNCTION docket_claim_from(text, integer, bigint, text[], boolean) RETURNS SETOF docket_items
  LANGUAGE plpgsql
  SET enable_bitmapscan = off
  AS $$
BEGIN
  RETURN QUERY
  WITH now AS MATERIALIZED (SELECT docket_now_ms() AS ms),
  controlled AS MATERIALIZED (
    SELECT coalesce(array_agg(c.kind), '{}') AS kinds FROM docket_kinds c
    WHERE $5 AND (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL)
  ),
  expired AS (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.state = 'running' AND i.lease_until <= (SELECT ms FROM now)
      AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
    ORDER BY i.priority DESC, i.run_at, i.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  waiting AS (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.state = 'waiting' AND i.run_at <= (SELECT ms FROM now)
      AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
      AND (i.dedupe_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM docket_items r
        WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
          AND r.lease_until > (SELECT ms FROM now)))
    ORDER BY i.priority DESC, i.run_at, i.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  picked AS (
    SELECT p.id FROM (SELECT * FROM expired UNION ALL SELECT * FROM waiting) p
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT $2
  ),
  claimed AS (
    UPDATE docket_items i
    SET state = 'running', attempts = i.attempts + 1, lease_seq = i.lease_seq + 1, claimed_by = $1,
        lease_until = (SELECT ms FROM now) + $3, updated_at = (SELECT ms FROM now)
    WHERE i.id = ANY(ARRAY(SELECT p.id FROM picked p))
    RETURNING i.*
  )
  SELECT * FROM claimed;
END
$$;

-- The claim, obeying the kinds' controls. Arguments: worker, batch size,
-- lease in ms, kinds (NULL for all), and the most items of limited kinds to
-- take (the worker's free slots: an item of a limited kind is never
-- prefetched, since waiting in a buffer it would hold one of the kind's
-- global places, or have used one of its starts, without running).
--
-- With no controlled kind among those claimed (the common case) it is the
-- claim of before plus one look-up in the small docket_kinds table. Otherwise:
-- paused kinds are left out; each limited kind's row is locked (in kind order,
-- so two claimers cannot deadlock), its allowance read after the lock (each
-- statement of a PL/pgSQL function takes a fresh snapshot, so it sees every
-- claim committed before the lock was granted): its limit less the items of
-- the kind holding a live lease, and the rate slots free; it is claimed up to
-- that allowance, and its slots take this claim's time. The other kinds are
-- claimed last, with what is left of the batch.
CREATE FUNCTION docket_claim(text, integer, bigint, text[], integer) RETURNS SETOF docket_items
  LANGUAGE plpgsql
  AS $$
DECLARE
  controlled text[];
  k record;
  now_ms bigint := docket_now_ms();
  remaining integer := $2;
  limited_left integer := least($2, $5);
  allowed integer;
  n integer;
BEGIN
  SELECT array_agg(c.kind) INTO controlled FROM docket_kinds c
  WHERE (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL) AND ($4 IS NULL OR c.kind = ANY($4));
  IF controlled IS NULL THEN
    RETURN QUERY SELECT * FROM docket_claim_from($1, $2, $3, $4, true);
    RETURN;
  END IF;
  FOR k IN
    SELECT c.kind, c.concurrency, c.rate_limit, c.rate_period_ms FROM docket_kinds c
    WHERE c.kind = ANY(controlled) AND NOT c.paused
    ORDER BY c.kind
    FOR UPDATE
  LOOP
    EXIT WHEN limited_left <= 0;
    allowed := limited_left;
    IF k.concurrency IS NOT NULL THEN
      SELECT k.concurrency - count(*) INTO n FROM docket_items r
      WHERE r.state = 'running' AND r.kind = k.kind AND r.lease_until > now_ms;
      allowed := least(allowed, n);
    END IF;
    IF k.rate_limit IS NOT NULL THEN
      SELECT count(*) INTO n FROM docket_kind_slots s
      WHERE s.kind = k.kind AND s.started_at <= now_ms - k.rate_period_ms;
      allowed := least(allowed, n);
    END IF;
    IF allowed > 0 THEN
      RETURN QUERY SELECT * FROM docket_claim_from($1, allowed, $3, ARRAY[k.kind], false);
      GET DIAGNOSTICS n = ROW_COUNT;
      remaining := remaining - n;
      limited_left := limited_left - n;
      IF n > 0 AND k.rate_limit IS NOT NULL THEN
        UPDATE docket_kind_slots s SET started_at = now_ms
        WHERE s.kind = k.kind AND s.slot IN (
          SELECT o.slot FROM docket_kind_slots o WHERE o.kind = k.kind ORDER BY o.started_at, o.slot LIMIT n);
      END IF;
    END IF;
  END LOOP;
  IF remaining > 0 THEN
    RETURN QUERY SELECT * FROM docket_claim_from($1, remaining, $3, $4, true);
  END IF;
END
$$;

-- The claim of earlier versions, for their processes during a rolling
-- upgrade: it now obeys the controls too (no item of theirs is prefetched
-- differently: they pass their whole batch).
CREATE OR REPLACE FUNCTION docket_claim(text, integer, bigint, text[]) RETURNS SETOF docket_items
  LANGUAGE sql
  AS 'SELECT * FROM docket_claim($1, $2, $3, $4, $2)';
