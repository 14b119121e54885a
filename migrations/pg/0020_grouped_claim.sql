-- Grouped items out of the general claim (issue 36, "Speed"): a big grouped
-- backlog no longer slows every claim.
--
-- Before: docket_items_claim held every waiting item, grouped ones too. A
-- grouped kind is controlled (0017, 0019), so the general walks
-- (docket_claim_from, docket_claim_after) skip its items, but one row at a
-- time: a claim that asked for more than the grouped claim gave (a pool asks
-- for its free slots of controlled kinds and more for the rest) read past
-- every waiting grouped item in the index. Measured on 1,000,000 waiting
-- items in 100,000 ordered groups: a claim of 10 (1 of the grouped kind)
-- 244 ms, a drain of 8.85 items/s against 706 ungrouped. After: that claim
-- 0.6 ms, the drain 4,566 items/s (docs/benchmarks.md, "Groups (issue 36):
-- grouped items out of the general claim").
--
-- Now: docket_items_claim holds only ungrouped waiting items (group_key IS
-- NULL), the general walks read only those (and only ungrouped ended
-- leases), and every grouped item is claimed by the grouped claim
-- (docket_claim_groups), which walks the groups through docket_items_group
-- and each group's due items through docket_items_group_due: seeks, whatever
-- the backlog. A kind with unfinished grouped items is controlled whether or
-- not it has perGroup limits or paused groups: docket_claim_next finds those
-- kinds with a skip scan of docket_items_group (one seek per such kind; one
-- into an empty index when no item has a group, so ungrouped claims pay a
-- seek and nothing else), and claims their grouped items with no limit per
-- group (as 0019 does for a kind with paused groups and no perGroup), round-
-- robin across groups from the kind's cursor, under its row's lock. A kind
-- that has no docket_kinds row gets one (defaults: no limits) the first time,
-- for that lock and that cursor. Its ungrouped items go on being claimed as
-- before: by the general walk (the walks' own list of controlled kinds is
-- unchanged, and they read only ungrouped items) and after the groups, within
-- the grouped claim.
--
-- Why this and not the general walk starting past the controlled kinds: the
-- index is ordered by priority, run_at and id across kinds, so the grouped
-- items lie among the rest and no start point passes them; an index per kind
-- would lose the walk's single order across kinds. Why finding the grouped
-- kinds at claim time rather than a flag on docket_kinds set at enqueue:
-- every path that makes an item (enqueue, bulk insert, schedules, workflows,
-- a replace, a dead item retried) would have to set it, and a flag set on a
-- kind's row at enqueue would wait behind the claims that lock that row; the
-- skip scan is always right, and costs a seek a claim.
--
-- Prefetch: a claim gives the controlled kinds, grouped ones among them, at
-- most the pool's free slots first (as before), then the general walk the
-- rest of the batch, and then what is still left to the grouped kinds with
-- no limit on the kind as a whole (concurrency, rate) and no per-group rate.
-- A limited kind's prefetched item would hold the kind's place or use its
-- start while it waits in the pool's buffer; a grouped item holds only its
-- group's place, with its lease, as a running item does, so prefetching it
-- breaks no limit, and a grouped backlog drains in whole batches instead of a
-- claim per free slot. A per-group rate counts starts at the claim, so those
-- kinds stay at the free slots.
--
-- What changes for a kind with grouped items and no perGroup: its grouped
-- items now start round-robin across groups (priority orders items within a
-- group, not across groups, as for a perGroup kind), and its claims of
-- grouped items are serialised by its row's lock.
--
-- The index is rebuilt in the migration's transaction (writes to
-- docket_items wait meanwhile: about a second per million waiting items).
DROP INDEX docket_items_claim;
CREATE INDEX docket_items_claim ON docket_items (priority DESC, run_at, id)
  WHERE state = 'waiting' AND group_key IS NULL;

-- The general walks: the texts of 0019, each read of waiting items and of
-- ended leases with `i.group_key IS NULL` (what lets the planner use the
-- partial index above, and keeps a grouped item from being claimed past its
-- group's limits).

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
    WHERE $5 AND (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR c.group_concurrency IS NOT NULL
      OR c.paused_groups > 0)
  ),
  expired AS (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.state = 'running' AND i.group_key IS NULL AND i.lease_until <= (SELECT ms FROM now)
      AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
    ORDER BY i.priority DESC, i.run_at, i.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  priorities AS (
    (SELECT i.priority, 1 AS n FROM docket_items i WHERE i.state = 'waiting' AND i.group_key IS NULL ORDER BY i.priority DESC LIMIT 1)
    UNION ALL
    SELECT q.priority, p.n + 1 FROM priorities p
    CROSS JOIN LATERAL (
      SELECT i.priority FROM docket_items i WHERE i.state = 'waiting' AND i.group_key IS NULL AND i.priority < p.priority
      ORDER BY i.priority DESC LIMIT 1
    ) q
    WHERE p.n < 64
  ),
  waiting AS (
    SELECT w.id, w.priority, w.run_at FROM (
      SELECT l.id, l.priority, l.run_at FROM priorities p
      CROSS JOIN LATERAL (
        SELECT i.id, i.priority, i.run_at FROM docket_items i
        WHERE i.state = 'waiting' AND i.group_key IS NULL AND i.priority = p.priority AND i.run_at <= (SELECT ms FROM now)
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
          AND i.state = 'waiting' AND i.group_key IS NULL AND i.run_at <= (SELECT ms FROM now)
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
      OR c.paused_groups > 0
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
      WHERE $5 IS NULL AND i.state = 'running' AND i.group_key IS NULL AND i.lease_until <= (SELECT ms FROM now)
        AND ($4 IS NULL OR i.kind = ANY($4)) AND i.kind <> ALL((SELECT c.kinds FROM controlled c)::text[])
      ORDER BY i.priority DESC, i.run_at, i.id
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    ) a
    UNION ALL
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at, i.lease_until FROM docket_items i
      WHERE $5 IS NOT NULL AND i.state = 'running' AND i.group_key IS NULL AND i.lease_until <= (SELECT ms FROM now)
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
        WHERE i.state = 'waiting' AND i.group_key IS NULL AND i.priority < coalesce(p.priority::bigint, 2147483648)
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
        WHERE i.state = 'waiting' AND i.group_key IS NULL AND i.priority = p.priority AND i.run_at <= (SELECT ms FROM now)
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
          AND i.state = 'waiting' AND i.group_key IS NULL AND i.run_at <= (SELECT ms FROM now)
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
  grouped text[];
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
  -- The kinds with unfinished grouped items: a seek in docket_items_group per
  -- kind (a skip scan), one into an empty index when no item has a group.
  IF $4 IS NULL THEN
    WITH RECURSIVE g AS (
      (SELECT i.kind FROM docket_items i
       WHERE i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') ORDER BY i.kind LIMIT 1)
      UNION ALL
      SELECT (SELECT i.kind FROM docket_items i
              WHERE i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') AND i.kind > g.kind
              ORDER BY i.kind LIMIT 1)
      FROM g WHERE g.kind IS NOT NULL
    )
    SELECT array_agg(g.kind) INTO grouped FROM g WHERE g.kind IS NOT NULL;
  ELSE
    SELECT array_agg(x.kind) INTO grouped FROM unnest($4) x(kind)
    WHERE EXISTS (SELECT 1 FROM docket_items i
                  WHERE i.kind = x.kind AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running'));
  END IF;
  -- Its row, which the grouped claim locks and keeps the groups' cursor in,
  -- made for a kind that has none (no handler declared limits for it).
  IF grouped IS NOT NULL THEN
    INSERT INTO docket_kinds (kind, updated_at)
    SELECT x.kind, now_ms FROM unnest(grouped) x(kind)
    WHERE NOT EXISTS (SELECT 1 FROM docket_kinds c WHERE c.kind = x.kind)
    ON CONFLICT DO NOTHING;
  END IF;
  SELECT array_agg(c.kind) INTO controlled FROM docket_kinds c
  WHERE (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR c.group_concurrency IS NOT NULL
    OR c.paused_groups > 0 OR c.kind = ANY(grouped)) AND ($4 IS NULL OR c.kind = ANY($4));
  IF controlled IS NOT NULL THEN
    FOR k IN
      SELECT c.kind, c.concurrency, c.rate_limit, c.rate_period_ms, c.group_concurrency, c.group_ordered,
        c.paused_groups FROM docket_kinds c
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
        IF k.group_concurrency IS NULL AND k.paused_groups = 0 AND NOT coalesce(k.kind = ANY(grouped), false) THEN
          RETURN QUERY SELECT c, false, NULL::bigint, NULL::bigint FROM docket_claim_from($1, allowed, $3, ARRAY[k.kind], false) c;
        ELSE
          RETURN QUERY SELECT c, false, NULL::bigint, NULL::bigint
            FROM docket_claim_groups($1, allowed, $3, k.kind, k.group_concurrency,
              k.group_ordered AND k.group_concurrency IS NOT NULL) c;
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
        remaining := remaining - 1;
      END IF;
    END LOOP;
  END IF;
  -- What the general walk left of the batch goes to the grouped kinds that
  -- have no limit on the kind as a whole and no per-group rate: their items
  -- may be prefetched, as ungrouped ones are (a buffered item holds its
  -- group's place with its lease, as a running one does), so a grouped
  -- backlog drains in whole batches, not a claim per free slot. After the
  -- general walk, so ungrouped work keeps the rest of the batch first.
  IF remaining > 0 AND grouped IS NOT NULL THEN
    FOR k IN
      SELECT c.kind, c.group_concurrency, c.group_ordered FROM docket_kinds c
      WHERE c.kind = ANY(grouped) AND c.kind = ANY(controlled) AND NOT c.paused AND c.concurrency IS NULL
        AND c.rate_limit IS NULL AND c.group_rate_limit IS NULL
      ORDER BY c.kind
      FOR UPDATE
    LOOP
      EXIT WHEN remaining <= 0;
      RETURN QUERY SELECT c, false, NULL::bigint, NULL::bigint
        FROM docket_claim_groups($1, remaining, $3, k.kind, k.group_concurrency,
          k.group_ordered AND k.group_concurrency IS NOT NULL) c;
      GET DIAGNOSTICS n = ROW_COUNT;
      remaining := remaining - n;
    END LOOP;
  END IF;
  item := NULL; walked := NULL; expired_until := bound;
  entries_read := pg_stat_get_xact_tuples_returned('docket_items_claim'::regclass)
    + pg_stat_get_xact_tuples_returned('docket_items_lease'::regclass) - read_before;
  RETURN NEXT;
END
$$;

-- docket_claim_groups (0019's) with its onDead 'hold' checked again after the
-- group's items are read and locked. A CI rehearsal of this release caught it
-- (test/worker/runtime/groupWake.ts): the hold was checked first, on its own
-- snapshot; a claim that ran while the group's head item was being made dead
-- read the hold before that commit and the head after it, and started the
-- item behind the dead one. Claims now come right after outcome writes more
-- often (src/Worker.ts: the recorder wakes a claimer after a short claim), which is
-- how the window was met. SQLite's claim runs in one write transaction, which
-- no outcome write can enter.
CREATE OR REPLACE FUNCTION docket_claim_groups(text, integer, bigint, text, integer, boolean)
  RETURNS SETOF docket_items
  LANGUAGE plpgsql
  SET jit = off
  AS $$
DECLARE
  now_ms bigint := docket_now_ms();
  start_key text;
  paused_n integer;
  hold boolean;
  skip_failed boolean;
  rate_n integer;
  rate_ms bigint;
  g text;
  nxt text;
  last_key text;
  wrapped boolean := false;
  steps integer := 0;
  left_n integer := $2;
  live integer;
  room integer;
  started integer;
  ids bigint[] := '{}';
  got bigint[];
  head bigint[];
  k integer;
  r record;
BEGIN
  SELECT c.group_cursor, c.paused_groups, c.group_on_dead = 'hold', c.group_on_failure = 'continue',
         c.group_rate_limit, c.group_rate_period_ms
    INTO start_key, paused_n, hold, skip_failed, rate_n, rate_ms
  FROM docket_kinds c WHERE c.kind = $4;
  -- Pass 1 takes at most one item per group, round-robin; pass 2 (when a
  -- group may run more than one) fills what is left, up to each group's free
  -- places. Each pass's items are leased (and its starts written) before the
  -- next, which counts them.
  FOR pass IN 1..(CASE WHEN coalesce($5, 2) > 1 THEN 2 ELSE 1 END) LOOP
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
      CONTINUE WHEN paused_n > 0 AND EXISTS (SELECT 1 FROM docket_groups p WHERE p.kind = $4 AND p.group_key = g);
      CONTINUE WHEN hold AND EXISTS (
        SELECT 1 FROM docket_items d WHERE d.kind = $4 AND d.group_key = g AND d.group_key IS NOT NULL AND d.state = 'dead');
      room := least(left_n, CASE WHEN pass = 1 THEN 1 ELSE coalesce($5, left_n) END);
      IF $5 IS NOT NULL THEN
        SELECT count(*) INTO live FROM docket_items i
        WHERE i.kind = $4 AND i.group_key = g AND i.state = 'running' AND i.lease_until > now_ms;
        room := least(room, $5 - live);
      END IF;
      IF rate_n IS NOT NULL THEN
        SELECT count(*) INTO started FROM docket_group_starts s
        WHERE s.kind = $4 AND s.group_key = g AND s.started_at > now_ms - rate_ms;
        room := least(room, rate_n - started);
      END IF;
      CONTINUE WHEN room <= 0;
      got := '{}';
      IF $6 THEN
        head := ARRAY(
          SELECT i.id FROM docket_items i
          WHERE i.kind = $4 AND i.group_key = g AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running')
            AND NOT (skip_failed AND i.state = 'waiting' AND i.run_at > now_ms AND i.last_error IS NOT NULL)
          ORDER BY i.id
          LIMIT $5);
        k := 0;
        FOR r IN
          SELECT i.id, i.state, i.run_at, i.lease_until, i.dedupe_key, i.kind FROM docket_items i
          WHERE i.kind = $4 AND i.group_key = g AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running')
            AND NOT (skip_failed AND i.state = 'waiting' AND i.run_at > now_ms AND i.last_error IS NOT NULL)
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
      -- The hold again, now that the group's items are read and locked: the
      -- check above ran on an earlier snapshot (each statement here takes its
      -- own), so a dead item committed between it and the read of the head
      -- would not hold the group, and the item behind it would start. A
      -- dead item the read above already saw as dead is seen here too.
      CONTINUE WHEN hold AND cardinality(got) > 0 AND EXISTS (
        SELECT 1 FROM docket_items d WHERE d.kind = $4 AND d.group_key = g AND d.group_key IS NOT NULL AND d.state = 'dead');
      IF rate_n IS NOT NULL AND cardinality(got) > 0 THEN
        DELETE FROM docket_group_starts s WHERE s.kind = $4 AND s.group_key = g AND s.started_at <= now_ms - rate_ms;
        INSERT INTO docket_group_starts (kind, group_key, started_at)
        SELECT $4, g, now_ms FROM generate_series(1, cardinality(got));
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
