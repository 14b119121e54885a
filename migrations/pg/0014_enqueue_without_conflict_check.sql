-- A single enqueue without a dedupe key inserts without ON CONFLICT.
--
-- docket_enqueue_one (0003, 0005) always inserted with ON CONFLICT DO
-- NOTHING. Only keyed rows can conflict (docket_items_waiting_key covers
-- `dedupe_key IS NOT NULL` alone), yet a speculative insertion costs every
-- row an extra WAL record and a second pass over the unique index, keyed or
-- not. The batch insert already leaves it out for batches without keys
-- (src/internal/sql/itemInsertMany.ts). Measured here (pgbench, one connection, the
-- statement Docket sends, 8 rotated rounds of 3 s, medians): 3,910 enqueues/s
-- with ON CONFLICT, 4,193 without. (The NOTIFY costs about as much: 3,914
-- against 3,510 in another 8 rounds without and with it. It stays: it is what
-- wakes an idle worker in another process at once.)
--
-- Same arguments, same result, same NOTIFY, delivered at commit; a keyed
-- enqueue is exactly as before. Replaced in place, so processes of the
-- release before this one, which call the same function, take the faster
-- path too. Each branch's statement keeps its own plan for the session. The
-- two branches differ in the key and ON CONFLICT alone; an INSERT cannot take
-- its ON CONFLICT clause conditionally, so the statement is written twice.
CREATE OR REPLACE FUNCTION docket_enqueue_one(text, text, text, integer, bigint, bigint, integer, text)
  RETURNS TABLE (new_id bigint, new_kind text, new_key text)
  LANGUAGE plpgsql
  AS $$
BEGIN
  IF $3 IS NULL THEN
    RETURN QUERY
    INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, max_attempts_given,
                              trace_context, created_at, updated_at)
    VALUES ($1, $2, NULL, $4, coalesce($5, docket_now_ms() + $6), coalesce($7, 8), $7 IS NOT NULL,
            $8, docket_now_ms(), docket_now_ms())
    RETURNING docket_items.id, docket_items.kind, docket_items.dedupe_key;
  ELSE
    RETURN QUERY
    INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, max_attempts_given,
                              trace_context, created_at, updated_at)
    VALUES ($1, $2, $3, $4, coalesce($5, docket_now_ms() + $6), coalesce($7, 8), $7 IS NOT NULL,
            $8, docket_now_ms(), docket_now_ms())
    ON CONFLICT DO NOTHING
    RETURNING docket_items.id, docket_items.kind, docket_items.dedupe_key;
  END IF;
  IF FOUND THEN
    PERFORM pg_notify('docket_items', 'enqueued');
  END IF;
END
$$;
