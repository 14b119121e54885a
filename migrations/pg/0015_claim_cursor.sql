-- Claims that stay fast while vacuum is held back (issue 35, W9).
--
-- The claim walks docket_items_claim (priority DESC, run_at, id, waiting
-- rows only) from the head of each priority, and the expired leases through
-- docket_items_lease (lease_until, running rows only) from the oldest. Every
-- claimed item leaves a dead entry at the head of the first (its waiting
-- version was updated to running) and every finished one a dead entry at the
-- old end of the second (its running version was deleted or moved to
-- history). Vacuum removes them, and a scan marks them dead on its first
-- visit (then skips them), but only once no snapshot can still see the rows:
-- while any session of the database holds an old snapshot (a report in
-- REPEATABLE READ, a connection idle in transaction, pg_dump, a standby's
-- query through hot_standby_feedback, a prepared transaction), every claim
-- reads every dead entry again, visiting its heap tuple to find it invisible.
-- Measured (50,000 items a round, a snapshot held): entries read per claim
-- grew from 5,000 in round 1 to 230,000 in the claim index and 190,000 in
-- the lease index by round 6, and a round's drain time with them.
--
-- No layout avoids the entries (any change of a row leaves one in each index
-- whose key or predicate it left), so the claim avoids reading them: it
-- starts each priority's walk after the position of the last item its worker
-- claimed there (the cursor: run_at, id), a seek past the dead entries, and
-- reads only the leases that ended since its last claim (the bound it
-- returns). The worker (src/internal/sql/claimCursors.ts) keeps both. It
-- claims from cursors only after a full walk (the claim of 0013) read many
-- more index entries than it claimed (the sign of dead entries it could not
-- skip; otherwise every claim is a full walk, as before), and then sends a
-- full walk again at least every second, more rarely when a full walk is slow
-- (20 times its duration, at most 10 s): what lands behind a cursor is
-- claimed by the next full walk. That is an item enqueued with a
-- run-after in the past or committed late by a long transaction, an item
-- given back to waiting, a keyed item whose twin held it back, or an item of
-- a kind that was paused or limited and no longer is. Everything else keeps
-- claim order (priority, run-after, id): the cursor walk takes the due items
-- of each priority in order from its cursor, highest priority first, finds
-- priorities it has no cursor for between the ones it has, and sorts them
-- with the expired leases as before.
--
-- The fenced writes (complete, extend, fail, release, snooze) had the same
-- growth through their plans, and find their rows by primary key now
-- (src/internal/sql/held.ts); no schema change is needed for that.
--
-- docket_claim_after: the walk of the kinds that are not limited, from the
-- cursors. $1 worker, $2 limit, $3 lease in ms, $4 kinds or NULL, $5 the
-- cursors' priorities, $6 their run_at, $7 their id (one position each; a
-- priority absent from $5 is walked from its head; $5 NULL: every priority
-- from its head, the full walk), $8 the expired leases' bound: only leases
-- that ended after it are looked at (NULL: every ended lease). Controlled
-- kinds (paused or limited) are left out, as in docket_claim_from with $5
-- true. With $5 and $8 NULL it claims what docket_claim_from($1, $2, $3, $4,
-- true) claims, in the same order.
--
-- Returns the claimed items (expired_until NULL), then one row without an
-- item whose expired_until is the bound for the next claim: the newest time
-- up to which every ended lease this claim could see was claimed, so the next
-- claim reads only the leases that end after it (a lease's end only moves
-- forward while it runs). That is now, or just before the earliest ended
-- lease the batch had no room for, or (read in the order they ended, as from
-- the cursors) just before the last one read when they filled the limit.
-- NULL after a full walk that the ended leases filled (more may have ended,
-- in no order to bound them by): the worker then keeps the bound it had.
-- While claims go on from cursors, ended leases are thus claimed in the order
-- they ended, not by priority; a full walk claims them in claim order.
CREATE FUNCTION docket_claim_after(text, integer, bigint, text[], integer[], bigint[], bigint[], bigint)
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
    WHERE c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL
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

-- docket_claim_next: docket_claim (0006, 0010) with the cursors. $1-$5 as
-- docket_claim's, $6-$8 the cursors as docket_claim_after's $5-$7, or NULL
-- for a full walk, $9 the expired leases' bound (docket_claim_after's $8).
-- Returns each item with `walked`: true when it came from the walk that the
-- cursors follow (the claim of the kinds that are not limited), false for a
-- limited kind's, claimed by a walk of its own from the head (its items wait
-- there while its allowance is spent, so a cursor must not pass them). The
-- worker moves its cursors by the walked items only: the walk's batch is a
-- prefix of claim order, so every item it could take before the last one it
-- took is taken.
--
-- Then one row without an item: `expired_until`, the bound for the next claim
-- (docket_claim_after's; $9 again when the limited kinds filled the batch),
-- and `entries_read`, how many entries of the claim and lease indexes this
-- claim read (the transaction's own statistics, read before and after). A
-- full walk that read far more entries than it claimed met dead entries (or
-- other kinds' items) it could not skip; only then does the worker go on from
-- cursors: while vacuum keeps up, every claim is a full walk, as before 0015.
CREATE FUNCTION docket_claim_next(text, integer, bigint, text[], integer, integer[], bigint[], bigint[], bigint)
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
  WHERE (c.paused OR c.concurrency IS NOT NULL OR c.rate_limit IS NOT NULL) AND ($4 IS NULL OR c.kind = ANY($4));
  IF controlled IS NOT NULL THEN
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
        RETURN QUERY SELECT c, false, NULL::bigint, NULL::bigint FROM docket_claim_from($1, allowed, $3, ARRAY[k.kind], false) c;
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
