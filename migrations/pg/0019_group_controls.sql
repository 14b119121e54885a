-- Groups of a kind, the claim's side (issue 36, "Actors"), on top of 0017:
--
-- * Pausing one group (a tenant that misbehaves): a row in docket_groups
--   while the group is paused (deleted at its resume), and docket_kinds.
--   paused_groups counting those rows. A kind with a paused group is
--   controlled, as a limited or grouped kind is (the general walks leave it
--   out; docket_claim_next claims it through docket_claim_groups under its
--   row's lock), even when it has no perGroup limits: its grouped items must
--   be held back group by group, and only the grouped claim walks groups.
--   Why a count in docket_kinds rather than a look at docket_groups from the
--   claims: the claims already read each controlled kind's row, so a kind
--   with no paused group costs them nothing more, and the ungrouped claim
--   path is unchanged. The count stays exact under concurrent pauses: a pause
--   adds the rows its insert made (none when the group was paused already;
--   two pauses of one group meet on its primary key, the second adds none),
--   a resume subtracts the rows its delete removed, each in one statement
--   that updates the kind's row from its latest version.
-- * perGroup.onFailure ('wait': an ordered group waits through its failed
--   item's retries and backoff, as in 0017; 'continue': an item waiting for a
--   retry after a failure (it has a last error and is not due) does not hold
--   its group's place, the items behind it go on; once due it runs at its
--   place, ahead of the later ones). perGroup.onDead ('release': a dead item
--   frees its group, as in 0017; 'hold': nothing of the group starts while it
--   has a dead item, until a person retries or deletes it; the other groups
--   go on). A dead item stays in docket_items (0011), so the hold is one seek
--   in docket_items_group_dead.
-- * perGroup.rate: at most group_rate_limit starts of one group in any window
--   of group_rate_period_ms. Each start is a row of docket_group_starts,
--   written in the claim's own transaction, so a start counts exactly when
--   its claim committed, whatever happens to its worker after (a killed
--   worker's start still counts; a claim rolled back left no row). The claim
--   counts the group's rows newer than a period ago after the kind's row lock
--   is granted, so two claimers cannot both see a free start. Why not the
--   items' own times: an item keeps no time of its start (updated_at moves
--   with every change, and a retried item starts again), and a finished item
--   moves to docket_done; why not the kind's fixed slots (0006): a kind's
--   groups are not known ahead, and a table of the last period's starts needs
--   no row per group made in advance. A group's rows older than a period are
--   deleted when the group is next claimed, so the table holds at most
--   group_rate_limit rows per group.
-- * A person's setting of the per-group concurrency and rate
--   (group_limits_set_by 'person': `docket kind set --per-group-concurrency
--   --per-group-rate`) wins over the handlers' declarations until `docket
--   kind reset`, as a kind's global limits do (0006).

ALTER TABLE docket_kinds ADD COLUMN paused_groups integer NOT NULL DEFAULT 0;
ALTER TABLE docket_kinds ADD COLUMN group_on_failure text NOT NULL DEFAULT 'wait'
  CHECK (group_on_failure IN ('wait', 'continue'));
ALTER TABLE docket_kinds ADD COLUMN group_on_dead text NOT NULL DEFAULT 'release'
  CHECK (group_on_dead IN ('release', 'hold'));
ALTER TABLE docket_kinds ADD COLUMN group_rate_limit integer CHECK (group_rate_limit >= 1);
ALTER TABLE docket_kinds ADD COLUMN group_rate_period_ms bigint CHECK (group_rate_period_ms >= 1);
ALTER TABLE docket_kinds ADD CONSTRAINT docket_kinds_group_rate CHECK ((group_rate_limit IS NULL) = (group_rate_period_ms IS NULL));
ALTER TABLE docket_kinds ADD COLUMN group_limits_set_by text NOT NULL DEFAULT 'code'
  CHECK (group_limits_set_by IN ('code', 'person'));

-- The paused groups: a row while the group is paused.
CREATE TABLE docket_groups (
  kind      text   NOT NULL,
  group_key text   NOT NULL,
  paused_at bigint NOT NULL,
  PRIMARY KEY (kind, group_key)
);

-- A rate-limited group's starts of the last period (older ones are deleted at its next claim).
CREATE TABLE docket_group_starts (
  kind       text   NOT NULL,
  group_key  text   NOT NULL,
  started_at bigint NOT NULL
);
CREATE INDEX docket_group_starts_group ON docket_group_starts (kind, group_key, started_at);

-- A group's dead items (onDead 'hold').
CREATE INDEX docket_items_group_dead ON docket_items (kind, group_key)
  WHERE group_key IS NOT NULL AND state = 'dead';

-- docket_claim_groups: as in 0017 (which says how the walk goes round the
-- groups and why an ordered group compares the rows it locked with its head),
-- with the settings above, read from the kind's row (locked by the caller):
-- a paused group is passed over (it counts as a group looked at), and so is a
-- held group (onDead 'hold' with a dead item); a rate-limited group starts at
-- most what its window has left, and its starts are written; onFailure
-- 'continue' leaves an ordered group's failed items waiting for their retry
-- out of its head. $5 is NULL for a kind that has paused groups but no
-- perGroup limits: its groups are walked round-robin with no limit each, only
-- so that the paused ones are passed over.
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

-- The general walks leave a kind with a paused group out, as they leave out
-- paused, limited and grouped kinds (otherwise the texts of 0017), and
-- docket_claim_next claims it through docket_claim_groups.

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
  WHERE (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR c.group_concurrency IS NOT NULL
    OR c.paused_groups > 0) AND ($4 IS NULL OR c.kind = ANY($4));
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
        IF k.group_concurrency IS NULL AND k.paused_groups = 0 THEN
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
      END IF;
    END LOOP;
  END IF;
  item := NULL; walked := NULL; expired_until := bound;
  entries_read := pg_stat_get_xact_tuples_returned('docket_items_claim'::regclass)
    + pg_stat_get_xact_tuples_returned('docket_items_lease'::regclass) - read_before;
  RETURN NEXT;
END
$$;
