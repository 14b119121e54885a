-- A claim skips the waiting items not yet due (issue 19, W6; as
-- migrations/sqlite/0013_claim_skip_scan.sql does for SQLite).
--
-- The claim read waiting items from docket_items_claim (priority DESC,
-- run_at, id) in claim order with run_at <= now as a condition on the
-- index's second column. With no condition on priority, the first,
-- PostgreSQL 15 cannot bound that walk (its btree has no skip scan before
-- PostgreSQL 18): a claim that found fewer due items than its batch (an idle
-- worker's poll, the end of a drain) read on through every item not yet due.
-- Measured with 1,000,000 items due in a day: 26 ms for an empty claim.
--
-- Now the claim walks the priorities itself (a loose index scan): the
-- highest priority of a waiting item is one index seek, the next lower one
-- another, and within each priority the due items are a range of the index
-- (priority = p AND run_at <= now), read in (run_at, id) order and cut to the
-- batch. The recursive CTE is evaluated only as far as the batch needs: the
-- claim stops pulling priorities once it has its rows, and it locks only the
-- rows it pulled. After 64 priorities without a full batch, the rest (lower
-- priorities) are read by the walk of before, so a queue with a distinct
-- priority per item costs at most 64 seeks more than it did. The same
-- measurement: 0.16-0.23 ms for the empty claim once PL/pgSQL keeps the
-- generic plan (from its sixth call in a session; the first five are
-- planned each time, 1.2-1.6 ms). The order of the batch, the two sources
-- (leases run out, waiting items), SKIP LOCKED, the kinds and the controls
-- are as in 0006 and 0010 (read there); CREATE OR REPLACE keeps the
-- function's grants and callers, and its SET options are given again.
--
-- The cut of `waiting` to the batch has no ORDER BY of its own (a sort there
-- would read every priority and lock up to 64 batches): it takes the first
-- $2 rows as the executor produces them, which is claim order because
-- (1) a recursive CTE yields its rows step by step, here one priority a step,
-- highest first (documented); (2) the LATERAL subquery, with its LIMIT and
-- FOR UPDATE and its reference to p.priority, cannot be flattened, so only a
-- nested loop can run it, and a nested loop keeps its outer rows' order (the
-- planner's own path keys rely on it); (3) UNION ALL runs its branches in
-- the order written unless it is a Parallel Append, which the UPDATE in
-- `claimed` and FOR UPDATE rule out. `picked` then sorts the union with the
-- expired items as before. A review compared this function with 0006's on
-- 300 random queues (up to 150 priorities, due and not, kinds, controls,
-- keyed twins, expired leases, batches of 1-1,000, other sessions' locks):
-- the same ids and the same number of row locks in every case; the
-- test/store/pg/claims.ts checks order and locks on a case where any other
-- order would take a different set.
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
