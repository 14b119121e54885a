-- The grouped claim's walk of sequences without a seek per group (issue 36,
-- "Speed": a W6-sized grouped backlog drains within 15% of W2).
--
-- Measured before (docs/benchmarks.md, "Groups (issue 36): a sequence's walk
-- without a seek per group"): G6 (1,000,000 due items in 100,000 ordered
-- groups, 50,000 drained by 10 slots) drains claim-bound. The claim's
-- backend was busy for 90% of the drain (docket_claim_groups 53 us per item
-- claimed, against 24 us for the general walk's docket_claim_after in the
-- same drain ungrouped), while the worker and the completions used less than
-- the other core. Of a claim of 3,000 sequences, backend CPU: the walk
-- statement 22-31 us per item, of which 10-17 us was finding the next group:
-- `group_key > $g ORDER BY group_key, id LIMIT 1` lands on a leaf of
-- docket_items_group and reads every entry after it on that page (PostgreSQL
-- 15's btree checks a page's matching entries when it lands), 8.5 us each,
-- where an equality seek of the primary key costs 3.2 us; the lease (an
-- UPDATE by id) 16 us, of which 3 us the primary key seek to find each row.
--
-- Now, for a sequence (ordered, one at a time, onFailure 'wait') with no
-- per-group rate, the walk reads the next groups from one range read of up
-- to 64 entries of docket_items_group after the last group looked at (each
-- group's first entry in that order is its head: its first unfinished item),
-- carries the groups it found in its row and takes them one a step, reading
-- again when they are used up: one landing per several groups (about six at
-- G6's ten items a group; one per group as before when groups are larger
-- than 64). Each group is then decided as 0021 decides a sequence's: passed
-- over when paused or held by a dead item (onDead 'hold'), or while an item
-- of it holds a live lease; its head taken if due (or its lease ended) and
-- its twin (dedupe key) not running, locked with SKIP LOCKED (a row being
-- written by another transaction: the group starts nothing). The walk keeps
-- each taken head's row address (ctid), and the lease updates by those
-- addresses: a row this transaction holds locked cannot move until it
-- commits. What a group starts, the cursor, the wrap, the 1,000 groups (or
-- the batch) a pass looks at, and the second look at the hold after the
-- locks are 0021's. Other groups (a perGroup concurrency above 1, unordered,
-- onFailure 'continue', a per-group rate) are walked as in 0021.
--
-- Claim of 3,000 sequences over G6's table, backend CPU per claim (each
-- rolled back; load 2-3, two alternations): 151 and 134 ms before, 126 and
-- 96 ms after.
CREATE OR REPLACE FUNCTION docket_claim_groups(text, integer, bigint, text, integer, boolean)
  RETURNS SETOF docket_items
  LANGUAGE plpgsql
  SET jit = off
  SET plan_cache_mode = force_generic_plan
  AS $$
DECLARE
  now_ms bigint := docket_now_ms();
  start_key text;
  paused_n integer;
  hold boolean;
  skip_failed boolean;
  rate_n integer;
  rate_ms bigint;
  after_key text;
  upto_key text;
  wrapped boolean;
  steps integer;
  left_n integer := $2;
  left_before integer;
  -- The most groups a pass looks at: 1,000, or the batch when it is larger
  -- (a walk that stops when the batch is full costs what it takes).
  max_steps integer := greatest(1000, $2);
  -- A sequence: one at a time, ordered, onFailure 'wait' (the walk locks its heads itself).
  seq boolean := $6 AND $5 = 1;
  steps_before integer;
  per integer;
  walked integer;
  walk_last text;
  walk_total integer;
  last_key text;
  ids bigint[];
  got bigint[];
  gs text[];
  ns integer[];
  -- A sequence with no per-group rate: its walk (below) keeps the heads' row
  -- addresses, which its lease updates by.
  fast boolean;
  tids tid[];
  got_tids tid[];
BEGIN
  SELECT c.group_cursor, c.paused_groups, c.group_on_dead = 'hold', c.group_on_failure = 'continue',
         c.group_rate_limit, c.group_rate_period_ms
    INTO start_key, paused_n, hold, skip_failed, rate_n, rate_ms
  FROM docket_kinds c WHERE c.kind = $4;
  seq := seq AND NOT skip_failed;
  fast := seq AND rate_n IS NULL;
  FOR pass IN 1..(CASE WHEN coalesce($5, 2) > 1 THEN 2 ELSE 1 END) LOOP
    EXIT WHEN left_n <= 0;
    per := CASE WHEN pass = 1 THEN 1 ELSE coalesce($5, left_n) END;
    after_key := coalesce(start_key, '');
    upto_key := NULL;
    wrapped := false;
    steps := 0;
    ids := '{}';
    tids := '{}';
    WHILE left_n > 0 AND steps < max_steps LOOP
      left_before := left_n;
      steps_before := steps;
      IF fast THEN
      -- A sequence's walk. The next groups come from one read of up to 64
      -- entries of docket_items_group after the last group (each group's
      -- first entry is its head), carried in the row until used, instead of
      -- a seek per group: a seek reads the rest of the index page it lands
      -- on, about 9 us against 3 us for the primary key's, and was a third of
      -- the walk. Each group's head is then taken as the general walk below
      -- takes a sequence's (its pause, its hold, its live leases, the head
      -- due or its lease ended, its twin), locked (SKIP LOCKED: being written
      -- by another transaction, the group starts nothing), and its row
      -- address kept for the lease.
      WITH RECURSIVE walk(n, g, pg, pi, total, id, tid) AS (
        SELECT 0, after_key, '{}'::text[], '{}'::bigint[], 0, NULL::bigint, NULL::tid
        UNION ALL
        SELECT w.n + 1, c.g, c.pg, c.pi, w.total + (h.id IS NOT NULL)::integer, h.id, h.tid
        FROM walk w
        CROSS JOIN LATERAL (
          SELECT w.pg[1] AS g, w.pi[1] AS first_id, w.pg[2:] AS pg, w.pi[2:] AS pi
          WHERE cardinality(w.pg) > 0
          UNION ALL
          SELECT a.keys[1], a.heads[1], a.keys[2:], a.heads[2:] FROM (
            SELECT array_agg(f.g ORDER BY f.g) AS keys, array_agg(f.id ORDER BY f.g) AS heads FROM (
              SELECT DISTINCT ON (e.group_key) e.group_key AS g, e.id FROM (
                SELECT i.group_key, i.id FROM docket_items i
                WHERE i.kind = $4 AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') AND i.group_key > w.g
                  AND (upto_key IS NULL OR i.group_key <= upto_key)
                ORDER BY i.group_key, i.id LIMIT 64
              ) e
              ORDER BY e.group_key, e.id
            ) f
          ) a
          WHERE cardinality(w.pg) = 0 AND a.keys IS NOT NULL
        ) c
        LEFT JOIN LATERAL (
          SELECT i.id, i.ctid AS tid FROM docket_items i
          WHERE i.id = c.first_id AND i.state IN ('waiting', 'running')
            AND NOT (paused_n > 0 AND EXISTS (SELECT 1 FROM docket_groups q WHERE q.kind = $4 AND q.group_key = c.g))
            AND NOT (hold AND EXISTS (SELECT 1 FROM docket_items d
              WHERE d.kind = $4 AND d.group_key = c.g AND d.group_key IS NOT NULL AND d.state = 'dead'))
            AND NOT EXISTS (SELECT 1 FROM docket_items r
              WHERE r.kind = $4 AND r.group_key = c.g AND r.group_key IS NOT NULL AND r.state = 'running'
                AND r.lease_until > now_ms)
            AND CASE WHEN i.state = 'running' THEN i.lease_until <= now_ms
                ELSE i.run_at <= now_ms AND (i.dedupe_key IS NULL OR NOT EXISTS (
                  SELECT 1 FROM docket_items t
                  WHERE t.state = 'running' AND t.kind = i.kind AND t.dedupe_key = i.dedupe_key
                    AND t.lease_until > now_ms)) END
          FOR UPDATE SKIP LOCKED
        ) h ON true
        WHERE w.total < left_n AND w.n < max_steps - steps
      )
      SELECT (SELECT max(w.n) FROM walk w),
        (SELECT w.g FROM walk w ORDER BY w.n DESC LIMIT 1),
        (SELECT w.total FROM walk w ORDER BY w.n DESC LIMIT 1),
        ARRAY(SELECT w.g FROM walk w WHERE w.id IS NOT NULL ORDER BY w.n),
        ARRAY(SELECT w.id FROM walk w WHERE w.id IS NOT NULL ORDER BY w.n),
        ARRAY(SELECT w.tid FROM walk w WHERE w.id IS NOT NULL ORDER BY w.n)
      INTO walked, walk_last, walk_total, gs, got, got_tids;
      ELSE
      WITH RECURSIVE walk(n, g, span, total) AS (
        SELECT 0, after_key, '{}'::bigint[], 0
        UNION ALL
        SELECT w.n + 1, nx.g, p.span, w.total + p.taken
        FROM walk w
        CROSS JOIN LATERAL (
          SELECT i.group_key AS g, i.id AS first_id FROM docket_items i
          WHERE i.kind = $4 AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') AND i.group_key > w.g
            AND (upto_key IS NULL OR i.group_key <= upto_key)
          ORDER BY i.group_key, i.id LIMIT 1
        ) nx
        CROSS JOIN LATERAL (
          SELECT CASE
            WHEN paused_n > 0 AND EXISTS (SELECT 1 FROM docket_groups q WHERE q.kind = $4 AND q.group_key = nx.g) THEN 0
            WHEN hold AND EXISTS (SELECT 1 FROM docket_items d
              WHERE d.kind = $4 AND d.group_key = nx.g AND d.group_key IS NOT NULL AND d.state = 'dead') THEN 0
            ELSE least(per, left_n - w.total,
              CASE WHEN $5 IS NOT NULL THEN $5 - (SELECT count(*) FROM docket_items r
                WHERE r.kind = $4 AND r.group_key = nx.g AND r.group_key IS NOT NULL AND r.state = 'running'
                  AND r.lease_until > now_ms) END,
              CASE WHEN rate_n IS NOT NULL THEN rate_n - (SELECT count(*) FROM docket_group_starts s
                WHERE s.kind = $4 AND s.group_key = nx.g AND s.started_at > now_ms - rate_ms) END)
            END AS room
          OFFSET 0
        ) r
        CROSS JOIN LATERAL (
          SELECT x.span, (SELECT count(*)::integer FROM unnest(x.span) v WHERE v > 0) AS taken FROM (
          SELECT CASE
            WHEN r.room <= 0 THEN '{}'::bigint[]
            -- A sequence (one at a time, ordered, onFailure 'wait'): its head is
            -- the group's first unfinished item, the one the seek above found,
            -- locked here (skipped when another transaction holds it: then
            -- the group starts nothing, as below) and taken if claimable.
            WHEN seq THEN ARRAY(
              SELECT i.id FROM docket_items i
              WHERE i.id = nx.first_id AND i.state IN ('waiting', 'running')
                AND CASE WHEN i.state = 'running' THEN i.lease_until <= now_ms
                    ELSE i.run_at <= now_ms AND (i.dedupe_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM docket_items t
                      WHERE t.state = 'running' AND t.kind = i.kind AND t.dedupe_key = i.dedupe_key
                        AND t.lease_until > now_ms)) END
              FOR UPDATE SKIP LOCKED)
            -- An ordered group's head: live rows negated, then the claimable
            -- ones up to its room, stopping at the first one not claimable.
            WHEN $6 THEN ARRAY(
              SELECT CASE WHEN h.live THEN -h.id ELSE h.id END FROM (
                SELECT h.id, h.live,
                  count(*) FILTER (WHERE NOT h.live AND NOT h.ok) OVER (ORDER BY h.id) AS blocked,
                  count(*) FILTER (WHERE h.ok) OVER (ORDER BY h.id) AS k,
                  h.ok
                FROM (
                  SELECT i.id, (i.state = 'running' AND i.lease_until > now_ms) AS live,
                    CASE WHEN i.state = 'running' THEN i.lease_until <= now_ms
                    ELSE i.run_at <= now_ms AND (i.dedupe_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM docket_items t
                      WHERE t.state = 'running' AND t.kind = i.kind AND t.dedupe_key = i.dedupe_key
                        AND t.lease_until > now_ms)) END AS ok
                  FROM docket_items i
                  WHERE i.kind = $4 AND i.group_key = nx.g AND i.group_key IS NOT NULL
                    AND i.state IN ('waiting', 'running')
                    AND NOT (skip_failed AND i.state = 'waiting' AND i.run_at > now_ms AND i.last_error IS NOT NULL)
                  ORDER BY i.id
                  LIMIT $5
                ) h
              ) h
              WHERE h.blocked = 0 AND (h.live OR h.k <= r.room)
              ORDER BY h.id)
            ELSE ARRAY(
              SELECT x.id FROM (
                (SELECT i.id, i.priority, i.run_at FROM docket_items i
                 WHERE i.kind = $4 AND i.group_key = nx.g AND i.group_key IS NOT NULL AND i.state = 'running'
                   AND i.lease_until <= now_ms
                 ORDER BY i.id LIMIT r.room)
                UNION ALL
                (SELECT i.id, i.priority, i.run_at FROM docket_items i
                 WHERE i.kind = $4 AND i.group_key = nx.g AND i.group_key IS NOT NULL AND i.state = 'waiting'
                   AND i.run_at <= now_ms
                   AND (i.dedupe_key IS NULL OR NOT EXISTS (
                     SELECT 1 FROM docket_items t
                     WHERE t.state = 'running' AND t.kind = i.kind AND t.dedupe_key = i.dedupe_key
                       AND t.lease_until > now_ms))
                 ORDER BY i.priority DESC, i.run_at, i.id LIMIT r.room)
              ) x
              ORDER BY x.priority DESC, x.run_at, x.id
              LIMIT r.room)
            END AS span
          OFFSET 0) x
        ) p
        WHERE w.total < left_n AND w.n < max_steps - steps
      ),
      -- Each chosen row, its latest version locked (NULL: being written by
      -- another transaction, or no longer unfinished), and whether it is still
      -- as chosen: a live one still there, a chosen one still claimable.
      flat AS (
        SELECT w.n, w.g, e.v, e.o, seq OR coalesce(l.found AND (e.v < 0 OR l.ok), false) AS good
        FROM walk w
        CROSS JOIN LATERAL unnest(w.span) WITH ORDINALITY e(v, o)
        LEFT JOIN LATERAL (
          SELECT true AS found,
            (i.state = 'waiting' AND i.run_at <= now_ms) OR (i.state = 'running' AND i.lease_until <= now_ms) AS ok
          FROM docket_items i
          WHERE NOT seq AND i.id = abs(e.v) AND i.state IN ('waiting', 'running')
          FOR UPDATE SKIP LOCKED
        ) l ON true
        WHERE w.n > 0
      ),
      -- What is taken: an ordered group's rows only before its first one not
      -- as chosen, an unordered group's every one still as chosen.
      kept AS (
        SELECT f.n, f.g, f.v, f.o FROM (
          SELECT f.*, bool_and(f.good) OVER (PARTITION BY f.n ORDER BY f.o) AS clear FROM flat f
        ) f
        WHERE f.v > 0 AND f.good AND (NOT $6 OR f.clear)
      ),
      taken AS (
        SELECT k.n, k.g, count(*)::integer AS c FROM kept k GROUP BY k.n, k.g
      )
      SELECT (SELECT max(w.n) FROM walk w),
        (SELECT w.g FROM walk w ORDER BY w.n DESC LIMIT 1),
        (SELECT w.total FROM walk w ORDER BY w.n DESC LIMIT 1),
        ARRAY(SELECT t.g FROM taken t ORDER BY t.n),
        ARRAY(SELECT t.c FROM taken t ORDER BY t.n),
        ARRAY(SELECT k.v FROM kept k ORDER BY k.n, k.o)
      INTO walked, walk_last, walk_total, gs, ns, got;
      END IF;
      -- The hold again, after the locks (0020 says why; within one snapshot
      -- it now only narrows a dead item committed since the statement began).
      IF fast AND hold AND cardinality(got) > 0 THEN
        SELECT coalesce(array_agg(u.g ORDER BY u.o), '{}'), coalesce(array_agg(u.id ORDER BY u.o), '{}'),
               coalesce(array_agg(u.t ORDER BY u.o), '{}')
        FROM unnest(gs, got, got_tids) WITH ORDINALITY u(g, id, t, o)
        WHERE NOT EXISTS (
          SELECT 1 FROM docket_items d
          WHERE d.kind = $4 AND d.group_key = u.g AND d.group_key IS NOT NULL AND d.state = 'dead')
        INTO gs, got, got_tids;
      ELSIF hold AND cardinality(got) > 0 THEN
        SELECT ARRAY(SELECT u.g FROM unnest(gs) u(g) WHERE NOT EXISTS (
                 SELECT 1 FROM docket_items d
                 WHERE d.kind = $4 AND d.group_key = u.g AND d.group_key IS NOT NULL AND d.state = 'dead')),
               ARRAY(SELECT u.c FROM unnest(gs, ns) u(g, c) WHERE NOT EXISTS (
                 SELECT 1 FROM docket_items d
                 WHERE d.kind = $4 AND d.group_key = u.g AND d.group_key IS NOT NULL AND d.state = 'dead')),
               ARRAY(SELECT i.id FROM unnest(got) WITH ORDINALITY i(id, o) JOIN docket_items x ON x.id = i.id
                 WHERE NOT EXISTS (
                   SELECT 1 FROM docket_items d
                   WHERE d.kind = $4 AND d.group_key = x.group_key AND d.group_key IS NOT NULL AND d.state = 'dead')
                 ORDER BY i.o)
          INTO gs, ns, got;
      END IF;
      IF rate_n IS NOT NULL AND cardinality(gs) > 0 THEN
        DELETE FROM docket_group_starts s
        WHERE s.kind = $4 AND s.group_key = ANY(gs) AND s.started_at <= now_ms - rate_ms;
        INSERT INTO docket_group_starts (kind, group_key, started_at)
        SELECT $4, u.g, now_ms FROM unnest(gs, ns) u(g, c), generate_series(1, u.c);
      END IF;
      ids := ids || got;
      IF fast THEN
        tids := tids || got_tids;
      END IF;
      left_n := left_n - cardinality(got);
      steps := steps + walked;
      IF walked > 0 THEN
        after_key := walk_last;
        IF pass = 1 THEN
          last_key := walk_last;
        END IF;
      END IF;
      -- The walk stopped short of the batch and of the 1,000 groups: it met
      -- the last group. Wrap once, up to the group it started after.
      IF walk_total < left_before AND walked < max_steps - steps_before THEN
        EXIT WHEN wrapped OR start_key IS NULL;
        wrapped := true;
        after_key := '';
        upto_key := start_key;
      END IF;
    END LOOP;
    IF fast AND cardinality(tids) > 0 THEN
      -- By the locked rows' addresses (a row this transaction holds locked
      -- keeps its address until it commits), not a primary key seek each.
      RETURN QUERY
      WITH claimed AS (
        UPDATE docket_items i
        SET state = 'running', attempts = i.attempts + 1, lease_seq = i.lease_seq + 1, claimed_by = $1,
            lease_until = now_ms + $3, updated_at = now_ms
        WHERE i.ctid = ANY(tids) AND i.state IN ('waiting', 'running')
        RETURNING i.*
      )
      SELECT * FROM claimed;
    ELSIF cardinality(ids) > 0 THEN
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
    UPDATE docket_kinds c SET group_cursor = last_key WHERE c.kind = $4;
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