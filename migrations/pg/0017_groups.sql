-- Groups of a kind (issue 36, "Actors"): an item may name its group inside its
-- kind (`group` at enqueue, stored as group_key: GROUP is a reserved word), and
-- a kind may limit its groups (`perGroup: { concurrency, ordered }` on the
-- handler, written to docket_kinds by every pool at start, as its global
-- limits are). Items without a group, and kinds without `perGroup`, claim as
-- before: an ungrouped item is in none of the new indexes, and a kind without
-- group_concurrency is not controlled.
--
-- A kind with group_concurrency is controlled, like a limited kind (0006): the
-- general walks (docket_claim_from, docket_claim_after) leave it out, and
-- docket_claim_next claims it on its own under its docket_kinds row locked
-- FOR UPDATE, through docket_claim_groups. Why a lock on the kind's row, and
-- not a row per group or an advisory lock per group: the claim reads each
-- group's live leases (a count over docket_items_group_running) and must not
-- let a second claimer read the same count before the first commits; the
-- kind's row is locked already when the kind has global limits, it is one
-- lock per claim whatever the number of groups a batch touches (no lock
-- order to keep between groups, so no deadlock), and it keeps the count of
-- leases, not of bookkeeping, as the truth: a killed worker's item holds its
-- group until its lease ends, with no counter to repair. The cost is that the
-- claims of one grouped kind are serialised (as a limited kind's are), while
-- other kinds' claims never wait for it. Each statement of the PL/pgSQL
-- function takes a fresh snapshot, so after the lock is granted it sees every
-- claim committed before.
--
-- Fairness: the groups with items are walked from the kind's group_cursor
-- (the last group the previous claim looked at) in group order, wrapping
-- once; a first pass takes at most one item per group, and only when the
-- batch is not full does a second pass give each group up to its free
-- places. So a claim goes round the groups: one group's 100,000 waiting
-- items get one item per round, as another group's ten do. At most 1,000
-- groups are looked at per pass; the cursor moves past them, so the next
-- claim goes on from there. Priority orders items inside an unordered group,
-- not the groups: across groups the turn decides.
--
-- Ordered groups (group_ordered): the group's unfinished items (waiting or
-- running) in id order, that is enqueue order; priority does not reorder
-- them. The first group_concurrency of them are the only ones that may run;
-- a waiting one that is not due (a retry's backoff, a snooze, a delay) stops
-- the walk there, so the group waits for it (strict). Those rows are locked
-- FOR UPDATE SKIP LOCKED, like every row a claim takes, so a claim never
-- waits for another transaction (nor can deadlock with one); but a row
-- skipped there may be the group's head being failed by its holder, and the
-- item behind it must not start instead: the walk compares the locked rows
-- with the group's first items read just before, without locks, and stops
-- at the first one missing (the group gets its turn at the next claim).
ALTER TABLE docket_items ADD COLUMN group_key text;
ALTER TABLE docket_done ADD COLUMN group_key text;

ALTER TABLE docket_kinds ADD COLUMN group_concurrency integer CHECK (group_concurrency >= 1);
ALTER TABLE docket_kinds ADD COLUMN group_ordered boolean NOT NULL DEFAULT false;
ALTER TABLE docket_kinds ADD COLUMN group_cursor text;

-- The groups with unfinished items, and an ordered group's items in enqueue order.
CREATE INDEX docket_items_group ON docket_items (kind, group_key, id)
  WHERE group_key IS NOT NULL AND state IN ('waiting', 'running');
-- A group's running items (its live leases are counted from it, its ended ones found).
CREATE INDEX docket_items_group_running ON docket_items (kind, group_key)
  WHERE group_key IS NOT NULL AND state = 'running';
-- An unordered group's due items in claim order.
CREATE INDEX docket_items_group_due ON docket_items (kind, group_key, priority DESC, run_at, id)
  WHERE group_key IS NOT NULL AND state = 'waiting';

CREATE OR REPLACE VIEW docket_items_all AS
  SELECT id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error, claimed_by,
    lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context, snoozes, finished_at,
    result, errors, group_key
  FROM docket_items
  UNION ALL
  SELECT id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error, claimed_by,
    lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context, snoozes, finished_at,
    result, errors, group_key
  FROM docket_done;

-- docket_claim_groups: one grouped kind's claim, called by docket_claim_next
-- with the kind's row locked. $1 worker, $2 limit, $3 lease in ms, $4 kind,
-- $5 its group_concurrency, $6 group_ordered. The groups first (above), then
-- the kind's ungrouped items with what is left of $2, in claim order.
CREATE FUNCTION docket_claim_groups(text, integer, bigint, text, integer, boolean)
  RETURNS SETOF docket_items
  LANGUAGE plpgsql
  SET jit = off
  AS $$
DECLARE
  now_ms bigint := docket_now_ms();
  start_key text;
  g text;
  nxt text;
  last_key text;
  wrapped boolean := false;
  steps integer := 0;
  left_n integer := $2;
  live integer;
  room integer;
  ids bigint[] := '{}';
  got bigint[];
  head bigint[];
  k integer;
  r record;
BEGIN
  SELECT k.group_cursor INTO start_key FROM docket_kinds k WHERE k.kind = $4;
  -- Pass 1 takes at most one item per group, round-robin; pass 2 (when a
  -- group may run more than one) fills what is left, up to each group's free
  -- places. Each pass's items are leased before the next, which counts them.
  FOR pass IN 1..(CASE WHEN $5 > 1 THEN 2 ELSE 1 END) LOOP
    EXIT WHEN left_n <= 0;
    g := coalesce(start_key, '');
    wrapped := false;
    steps := 0;
    ids := '{}';
    WHILE left_n > 0 AND steps < 1000 LOOP
      nxt := NULL;
      SELECT i.group_key INTO nxt FROM docket_items i
      WHERE i.kind = $4 AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') AND i.group_key > g
      ORDER BY i.group_key LIMIT 1;
      IF nxt IS NULL THEN
        EXIT WHEN wrapped OR start_key IS NULL;
        wrapped := true;
        g := '';
        CONTINUE;
      END IF;
      EXIT WHEN wrapped AND nxt > start_key;
      g := nxt;
      IF pass = 1 THEN
        last_key := nxt;
      END IF;
      steps := steps + 1;
      SELECT count(*) INTO live FROM docket_items i
      WHERE i.kind = $4 AND i.group_key = g AND i.state = 'running' AND i.lease_until > now_ms;
      room := least($5 - live, left_n, CASE WHEN pass = 1 THEN 1 ELSE $5 END);
      CONTINUE WHEN room <= 0;
      got := '{}';
      IF $6 THEN
        head := ARRAY(
          SELECT i.id FROM docket_items i
          WHERE i.kind = $4 AND i.group_key = g AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running')
          ORDER BY i.id
          LIMIT $5);
        k := 0;
        FOR r IN
          SELECT i.id, i.state, i.run_at, i.lease_until, i.dedupe_key, i.kind FROM docket_items i
          WHERE i.kind = $4 AND i.group_key = g AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running')
          ORDER BY i.id
          LIMIT $5
          FOR UPDATE SKIP LOCKED
        LOOP
          k := k + 1;
          -- A row skipped (locked by its holder's write) or gone since the read above: stop.
          EXIT WHEN k > cardinality(head) OR r.id <> head[k];
          CONTINUE WHEN r.state = 'running' AND r.lease_until > now_ms;
          EXIT WHEN r.state = 'waiting' AND (r.run_at > now_ms OR (r.dedupe_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM docket_items t
            WHERE t.state = 'running' AND t.kind = r.kind AND t.dedupe_key = r.dedupe_key AND t.lease_until > now_ms)));
          got := got || r.id;
          EXIT WHEN cardinality(got) >= room;
        END LOOP;
      ELSE
        SELECT coalesce(array_agg(u.id ORDER BY u.priority DESC, u.run_at, u.id), '{}') INTO got FROM (
          SELECT x.id, x.priority, x.run_at FROM (
            SELECT * FROM (SELECT i.id, i.priority, i.run_at FROM docket_items i
             WHERE i.kind = $4 AND i.group_key = g AND i.group_key IS NOT NULL AND i.state = 'running'
               AND i.lease_until <= now_ms
             ORDER BY i.id LIMIT room
             FOR UPDATE SKIP LOCKED) a
            UNION ALL
            SELECT * FROM (SELECT i.id, i.priority, i.run_at FROM docket_items i
             WHERE i.kind = $4 AND i.group_key = g AND i.group_key IS NOT NULL AND i.state = 'waiting'
               AND i.run_at <= now_ms
               AND (i.dedupe_key IS NULL OR NOT EXISTS (
                 SELECT 1 FROM docket_items t
                 WHERE t.state = 'running' AND t.kind = i.kind AND t.dedupe_key = i.dedupe_key
                   AND t.lease_until > now_ms))
             ORDER BY i.priority DESC, i.run_at, i.id LIMIT room
             FOR UPDATE SKIP LOCKED) b
          ) x
          ORDER BY x.priority DESC, x.run_at, x.id
          LIMIT room
        ) u;
      END IF;
      ids := ids || got;
      left_n := left_n - cardinality(got);
    END LOOP;
    IF cardinality(ids) > 0 THEN
      RETURN QUERY
      WITH claimed AS (
        UPDATE docket_items i
        SET state = 'running', attempts = i.attempts + 1, lease_seq = i.lease_seq + 1, claimed_by = $1,
            lease_until = now_ms + $3, updated_at = now_ms
        WHERE i.id = ANY(ids)
        RETURNING i.*
      )
      SELECT * FROM claimed;
    END IF;
  END LOOP;
  IF last_key IS NOT NULL THEN
    UPDATE docket_kinds k SET group_cursor = last_key WHERE k.kind = $4;
  END IF;
  IF left_n > 0 THEN
    RETURN QUERY
    WITH picked AS (
      SELECT x.id FROM (
        SELECT * FROM (SELECT i.id, i.priority, i.run_at FROM docket_items i
         WHERE i.state = 'running' AND i.lease_until <= now_ms AND i.kind = $4 AND i.group_key IS NULL
         ORDER BY i.lease_until LIMIT left_n
         FOR UPDATE SKIP LOCKED) a
        UNION ALL
        SELECT * FROM (SELECT i.id, i.priority, i.run_at FROM docket_items i
         WHERE i.state = 'waiting' AND i.run_at <= now_ms AND i.kind = $4 AND i.group_key IS NULL
           AND (i.dedupe_key IS NULL OR NOT EXISTS (
             SELECT 1 FROM docket_items t
             WHERE t.state = 'running' AND t.kind = i.kind AND t.dedupe_key = i.dedupe_key
               AND t.lease_until > now_ms))
         ORDER BY i.priority DESC, i.run_at, i.id LIMIT left_n
         FOR UPDATE SKIP LOCKED) b
      ) x
      ORDER BY x.priority DESC, x.run_at, x.id
      LIMIT left_n
    ),
    claimed AS (
      UPDATE docket_items i
      SET state = 'running', attempts = i.attempts + 1, lease_seq = i.lease_seq + 1, claimed_by = $1,
          lease_until = now_ms + $3, updated_at = now_ms
      WHERE i.id = ANY(ARRAY(SELECT p.id FROM picked p))
      RETURNING i.*
    )
    SELECT * FROM claimed;
  END IF;
END
$$;

-- The general walks leave grouped kinds out as they leave out paused and
-- limited ones (otherwise the texts of 0013 and 0015), and docket_claim_next
-- claims a grouped kind through docket_claim_groups.

CREATE OR REPLACE FUNCTION docket_claim_from(text, integer, bigint, text[], boolean) RETURNS SETOF docket_items
  LANGUAGE plpgsql
  SET enable_bitmapscan = off
  SET jit = off
  AS $$
BEGIN
  RETURN QUERY
  WITH RECURSIVE now AS MATERIALIZED (SELECT docket_now_ms() AS ms),
  controlled AS MATERIALIZED (
    SELECT coalesce(array_agg(c.kind), '{}') AS kinds FROM docket_kinds c
    WHERE $5 AND (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR c.group_concurrency IS NOT NULL)
  ),
  expired AS (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.state = 'running' AND i.lease_until <= (SELECT ms FROM now)
      AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
    ORDER BY i.priority DESC, i.run_at, i.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  priorities AS (
    (SELECT i.priority, 1 AS n FROM docket_items i WHERE i.state = 'waiting' ORDER BY i.priority DESC LIMIT 1)
    UNION ALL
    SELECT q.priority, p.n + 1 FROM priorities p
    CROSS JOIN LATERAL (
      SELECT i.priority FROM docket_items i WHERE i.state = 'waiting' AND i.priority < p.priority
      ORDER BY i.priority DESC LIMIT 1
    ) q
    WHERE p.n < 64
  ),
  waiting AS (
    SELECT w.id, w.priority, w.run_at FROM (
      SELECT l.id, l.priority, l.run_at FROM priorities p
      CROSS JOIN LATERAL (
        SELECT i.id, i.priority, i.run_at FROM docket_items i
        WHERE i.state = 'waiting' AND i.priority = p.priority AND i.run_at <= (SELECT ms FROM now)
          AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
          AND (i.dedupe_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM docket_items r
            WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
              AND r.lease_until > (SELECT ms FROM now)))
        ORDER BY i.run_at, i.id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
      ) l
      UNION ALL
      -- The same conditions as the branch above, written out again: a shared
      -- CTE would be read in full (it cannot take the priority from outside),
      -- and an OR of the two priority conditions would cost the index seek.
      SELECT f.id, f.priority, f.run_at FROM (
        SELECT i.id, i.priority, i.run_at FROM docket_items i
        WHERE (SELECT count(*) FROM priorities) >= 64 AND i.priority < (SELECT min(p.priority) FROM priorities p)
          AND i.state = 'waiting' AND i.run_at <= (SELECT ms FROM now)
          AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
          AND (i.dedupe_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM docket_items r
            WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
              AND r.lease_until > (SELECT ms FROM now)))
        ORDER BY i.priority DESC, i.run_at, i.id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
      ) f
    ) w
    LIMIT $2
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

CREATE OR REPLACE FUNCTION docket_claim_after(text, integer, bigint, text[], integer[], bigint[], bigint[], bigint)
  RETURNS TABLE (item docket_items, expired_until bigint)
  LANGUAGE plpgsql
  SET enable_bitmapscan = off
  SET jit = off
  AS $$
BEGIN
  RETURN QUERY
  WITH RECURSIVE now AS MATERIALIZED (SELECT docket_now_ms() AS ms),
  controlled AS MATERIALIZED (
    SELECT coalesce(array_agg(c.kind), '{}') AS kinds FROM docket_kinds c
    WHERE c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR c.group_concurrency IS NOT NULL
  ),
  cursors AS MATERIALIZED (
    SELECT c.p, c.r, c.i FROM unnest($5, $6, $7) AS c(p, r, i)
  ),
  -- Ended leases: on a full walk all of them, the first in claim order; from
  -- the cursors only those that ended after $8, the first in the order they
  -- ended (the lease index's own order, so the read stops at the batch and
  -- the next bound is exact, below).
  expired AS (
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at, i.lease_until FROM docket_items i
      WHERE $5 IS NULL AND i.state = 'running' AND i.lease_until <= (SELECT ms FROM now)
        AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
      ORDER BY i.priority DESC, i.run_at, i.id
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    ) a
    UNION ALL
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at, i.lease_until FROM docket_items i
      WHERE $5 IS NOT NULL AND i.state = 'running' AND i.lease_until <= (SELECT ms FROM now)
        AND i.lease_until > coalesce($8, -9223372036854775808)
        AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
      ORDER BY i.lease_until
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    ) b
  ),
  -- The priorities to walk, highest first, one a step: below the previous
  -- one, the higher of the next priority with a cursor and the highest
  -- waiting priority above that one (found from the index without passing
  -- through a priority the cursors skip). The seed row (n = 0) stands above
  -- every priority.
  priorities AS (
    SELECT NULL::integer AS priority, NULL::bigint AS r, NULL::bigint AS i, 0 AS n
    UNION ALL
    SELECT q.priority, q.r, q.i, p.n + 1 FROM priorities p
    CROSS JOIN LATERAL (
      SELECT coalesce(u.priority, k.p) AS priority,
             CASE WHEN u.priority IS NULL THEN k.r END AS r,
             CASE WHEN u.priority IS NULL THEN k.i END AS i
      FROM (SELECT 1) one
      LEFT JOIN LATERAL (
        SELECT c.p, c.r, c.i FROM cursors c
        WHERE c.p < coalesce(p.priority::bigint, 2147483648)
        ORDER BY c.p DESC LIMIT 1
      ) k ON true
      LEFT JOIN LATERAL (
        SELECT i.priority FROM docket_items i
        WHERE i.state = 'waiting' AND i.priority < coalesce(p.priority::bigint, 2147483648)
          AND i.priority > coalesce(k.p::bigint, -2147483649)
        ORDER BY i.priority DESC LIMIT 1
      ) u ON true
    ) q
    WHERE q.priority IS NOT NULL AND p.n < 64
  ),
  waiting AS (
    SELECT w.id, w.priority, w.run_at FROM (
      SELECT l.id, l.priority, l.run_at FROM priorities p
      CROSS JOIN LATERAL (
        SELECT i.id, i.priority, i.run_at FROM docket_items i
        WHERE i.state = 'waiting' AND i.priority = p.priority AND i.run_at <= (SELECT ms FROM now)
          AND (i.run_at, i.id) > (coalesce(p.r, -9223372036854775808), coalesce(p.i, -1))
          AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
          AND (i.dedupe_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM docket_items r
            WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
              AND r.lease_until > (SELECT ms FROM now)))
        ORDER BY i.run_at, i.id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
      ) l
      WHERE p.n > 0
      UNION ALL
      -- Past 64 priorities, the rest from their heads, as 0013 does (with
      -- cursors, only when 64 steps did not fill the batch).
      SELECT f.id, f.priority, f.run_at FROM (
        SELECT i.id, i.priority, i.run_at FROM docket_items i
        WHERE (SELECT count(*) FROM priorities) > 64 AND i.priority < (SELECT min(p.priority) FROM priorities p)
          AND i.state = 'waiting' AND i.run_at <= (SELECT ms FROM now)
          AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
          AND (i.dedupe_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM docket_items r
            WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
              AND r.lease_until > (SELECT ms FROM now)))
        ORDER BY i.priority DESC, i.run_at, i.id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
      ) f
    ) w
    LIMIT $2
  ),
  picked AS (
    SELECT p.id FROM (SELECT e.id, e.priority, e.run_at FROM expired e UNION ALL SELECT * FROM waiting) p
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
  SELECT c::docket_items, NULL::bigint FROM claimed c
  UNION ALL
  SELECT NULL::docket_items,
    CASE WHEN $5 IS NULL AND (SELECT count(*) FROM expired) >= $2 THEN NULL
    ELSE least((SELECT ms FROM now),
      (SELECT min(e.lease_until) - 1 FROM expired e WHERE e.id <> ALL(ARRAY(SELECT p.id FROM picked p))),
      CASE WHEN (SELECT count(*) FROM expired) >= $2 THEN (SELECT max(e.lease_until) - 1 FROM expired e) END) END;
END
$$;

CREATE OR REPLACE FUNCTION docket_claim_next(text, integer, bigint, text[], integer, integer[], bigint[], bigint[], bigint)
  RETURNS TABLE (item docket_items, walked boolean, expired_until bigint, entries_read bigint)
  LANGUAGE plpgsql
  SET jit = off
  AS $$
DECLARE
  controlled text[];
  k record;
  w record;
  now_ms bigint := docket_now_ms();
  remaining integer := $2;
  limited_left integer := least($2, $5);
  allowed integer;
  n integer;
  bound bigint := $9;
  read_before bigint := pg_stat_get_xact_tuples_returned('docket_items_claim'::regclass)
    + pg_stat_get_xact_tuples_returned('docket_items_lease'::regclass);
BEGIN
  SELECT array_agg(c.kind) INTO controlled FROM docket_kinds c
  WHERE (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR c.group_concurrency IS NOT NULL) AND ($4 IS NULL OR c.kind = ANY($4));
  IF controlled IS NOT NULL THEN
    FOR k IN
      SELECT c.kind, c.concurrency, c.rate_limit, c.rate_period_ms, c.group_concurrency, c.group_ordered FROM docket_kinds c
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
        IF k.group_concurrency IS NULL THEN
          RETURN QUERY SELECT c, false, NULL::bigint, NULL::bigint FROM docket_claim_from($1, allowed, $3, ARRAY[k.kind], false) c;
        ELSE
          RETURN QUERY SELECT c, false, NULL::bigint, NULL::bigint
            FROM docket_claim_groups($1, allowed, $3, k.kind, k.group_concurrency, k.group_ordered) c;
        END IF;
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
  END IF;
  IF remaining > 0 THEN
    FOR w IN SELECT a.item AS i, a.expired_until AS e FROM docket_claim_after($1, remaining, $3, $4, $6, $7, $8, $9) a LOOP
      IF (w.i).id IS NULL THEN
        bound := w.e;
      ELSE
        item := w.i; walked := true; expired_until := NULL; entries_read := NULL;
        RETURN NEXT;
      END IF;
    END LOOP;
  END IF;
  item := NULL; walked := NULL; expired_until := bound;
  entries_read := pg_stat_get_xact_tuples_returned('docket_items_claim'::regclass)
    + pg_stat_get_xact_tuples_returned('docket_items_lease'::regclass) - read_before;
  RETURN NEXT;
END
$$;

-- The previous releases' entry point (docket_claim of 0006 and 0010, which
-- older workers call) claims through docket_claim_next, so those workers obey
-- the groups too (without cursors, as they claimed before 0015).
CREATE OR REPLACE FUNCTION docket_claim(text, integer, bigint, text[], integer) RETURNS SETOF docket_items
  LANGUAGE sql
  SET jit = off
  AS $$SELECT (c.item).* FROM docket_claim_next($1, $2, $3, $4, $5, NULL, NULL, NULL, NULL) c WHERE (c.item).id IS NOT NULL$$;
