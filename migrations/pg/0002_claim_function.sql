-- The claim as a server-side function, for two reasons.
--
-- 1. Its plan. The waiting items must be read from docket_items_claim in claim
--    order, stopping after the batch. A queue table's statistics are nearly
--    always stale (a burst of 20,000 items arrives in a table the last ANALYZE
--    saw empty), and with them the planner chose a bitmap scan of every due
--    item followed by a sort: 13 ms for a batch of 1,000 out of 37,000, and
--    growing with the backlog, against 1 ms for the ordered index scan. The
--    function turns bitmap scans off for itself only (SET on the function),
--    which leaves the ordered index scan.
-- 2. Its planning. PL/pgSQL keeps the statement's plan for the session, so a
--    claim is not planned again each time (about 1 ms for this statement).
--
-- Two sources of due items, each skipping rows other claimers hold (SKIP
-- LOCKED): items whose lease ran out (their worker died) and waiting items,
-- each source in claim order. A waiting keyed item is not due while an item
-- with the same kind and key holds a live lease: the enqueue that arrived
-- while it ran runs after it, not beside it.
-- Both sources are due items, so the batch is the first $2 of their union in
-- claim order (priority, run-after, id): an expired low-priority item must not
-- take the place of a waiting high-priority one. Each source is cut to its own
-- first $2 in that order, so the union's first $2 are the overall first $2.
-- The update finds the picked rows by primary key (= ANY(ARRAY(...))): joined
-- as a table, a large pick made the planner hash-join over the whole table.
--
-- Arguments: worker name, batch size, lease in ms, kinds (NULL for all).
CREATE FUNCTION docket_claim(text, integer, bigint, text[]) RETURNS SETOF docket_items
  LANGUAGE plpgsql
  SET enable_bitmapscan = off
  AS $$
BEGIN
  RETURN QUERY
  WITH now AS MATERIALIZED (SELECT docket_now_ms() AS ms),
  expired AS (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.state = 'running' AND i.lease_until <= (SELECT ms FROM now)
      AND ($4 IS NULL OR i.kind = ANY($4))
    ORDER BY i.priority DESC, i.run_at, i.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  waiting AS (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.state = 'waiting' AND i.run_at <= (SELECT ms FROM now)
      AND ($4 IS NULL OR i.kind = ANY($4))
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
