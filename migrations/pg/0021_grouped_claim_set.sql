-- The grouped claim set-based (issue 36, "Speed": a W6-sized grouped backlog
-- drains within 15% of W2).
--
-- Before: docket_claim_groups (0020's) visited the groups one at a time, and
-- each group cost PL/pgSQL several statements of its own: the next group,
-- its pause and hold, its live leases, its rate's starts, its head read and
-- then read again locked, the hold again. Each is an executor start and end
-- and a snapshot, about 0.1 ms per item claimed on 1,000,000 items in
-- 100,000 ordered groups (docs/benchmarks.md, "Groups (issue 36): the
-- grouped claim set-based"), where the general walk takes a batch in one
-- statement: G6 drained at 0.34-0.44x of the same table ungrouped.
--
-- Now: one statement walks the groups of a pass (a recursive CTE: from the
-- cursor, the next group by a seek in docket_items_group, then, for that
-- group, what it may start and which items, each a LATERAL subquery of index
-- seeks; the recursion carries the number taken so far and stops when the
-- batch is full, when 1,000 groups are looked at, or at the last group),
-- then locks what it chose (FOR UPDATE SKIP LOCKED) and keeps what is still
-- claimable. The steps and what each decides are those of 0017 to 0020,
-- unchanged:
-- * round-robin from the kind's cursor, wrapping once; pass 1 one item per
--   group, pass 2 (perGroup concurrency above 1) up to each group's free
--   places; the cursor is the last group pass 1 looked at;
-- * at most 1,000 groups looked at a pass, as before, or now as many as the
--   batch when it is larger: a claim of 2,000 sequences filled only half
--   of it, so a grouped drain claimed twice as often as an ungrouped one
--   (the walk stops when the batch is full, so its cost follows what it takes);
-- * a paused group, and one held by a dead item (onDead 'hold'), starts
--   nothing; a group starts at most its concurrency less its live leases and
--   what its rate's window has left, and its starts are written;
-- * an ordered group: its first `concurrency` unfinished items in id order
--   (onFailure 'continue': without the failed ones waiting for their retry),
--   the live ones passed over, stopping at the first one not claimable (not
--   due, or its twin running); an unordered group: its ended leases and due
--   items in claim order.
-- What changes is only when each read happens: a group's reads now share one
-- snapshot (the statement's), where before each statement took its own.
-- That closes the window 0020 narrowed with its second look at the hold (a
-- dead item committed between the hold's read and the head's): a group
-- either is seen with the dead item, and held, or with it running, and its
-- live lease counted. The second look is kept, set-based, after the locks.
--
-- The locks, as 0017 says why: an ordered group's rows from its first one up
-- to the last chosen, live ones too, are locked; a row skipped (its holder is
-- writing it) or no longer claimable stops the group there, so the item
-- behind a head being failed never starts instead of it. The chosen rows of
-- an unordered group are locked and those still claimable kept. In the
-- statement, an ordered group's live rows ride along as negated ids (ids are
-- positive), so one array per group carries both what to lock and what to
-- take.
--
-- Cost: the statements per claim no longer grow with the groups: the
-- kind's settings, one walk per pass (two when it wraps), its lease, the
-- cursor, the ungrouped items. The plan is a nested loop of index seeks per
-- group looked at (test/store/pg/groupPlans.ts checks it reads no more than
-- that, with no Seq Scan on docket_items). Ungrouped items are not read by
-- it and pay nothing.
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
BEGIN
  SELECT c.group_cursor, c.paused_groups, c.group_on_dead = 'hold', c.group_on_failure = 'continue',
         c.group_rate_limit, c.group_rate_period_ms
    INTO start_key, paused_n, hold, skip_failed, rate_n, rate_ms
  FROM docket_kinds c WHERE c.kind = $4;
  seq := seq AND NOT skip_failed;
  FOR pass IN 1..(CASE WHEN coalesce($5, 2) > 1 THEN 2 ELSE 1 END) LOOP
    EXIT WHEN left_n <= 0;
    per := CASE WHEN pass = 1 THEN 1 ELSE coalesce($5, left_n) END;
    after_key := coalesce(start_key, '');
    upto_key := NULL;
    wrapped := false;
    steps := 0;
    ids := '{}';
    WHILE left_n > 0 AND steps < max_steps LOOP
      left_before := left_n;
      steps_before := steps;
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
      -- The hold again, after the locks (0020 says why; within one snapshot
      -- it now only narrows a dead item committed since the statement began).
      IF hold AND cardinality(got) > 0 THEN
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
