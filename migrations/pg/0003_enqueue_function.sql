-- One enqueue (the common case) as a server-side function: PL/pgSQL keeps
-- its plan for the session, so a single enqueue is not parsed and planned on
-- every call (the statement sent is a short function call). The same insert
-- as before: dedupe through the partial unique index (ON CONFLICT DO NOTHING:
-- a skipped row returns nothing), the item's times from the database's clock,
-- and one NOTIFY, delivered when the enclosing transaction commits.
--
-- Arguments: kind, payload (JSON text), dedupe key or NULL, priority,
-- run_at (epoch ms) or NULL, delay in ms (used when run_at is NULL),
-- max_attempts. Returns the new item's id, kind and key; no row when a
-- waiting item holds the key.
CREATE FUNCTION docket_enqueue_one(text, text, text, integer, bigint, bigint, integer)
  RETURNS TABLE (new_id bigint, new_kind text, new_key text)
  LANGUAGE plpgsql
  AS $$
BEGIN
  RETURN QUERY
  WITH ins AS (
    INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, created_at, updated_at)
    VALUES ($1, $2, $3, $4, coalesce($5, docket_now_ms() + $6), $7, docket_now_ms(), docket_now_ms())
    ON CONFLICT DO NOTHING
    RETURNING docket_items.id, docket_items.kind, docket_items.dedupe_key
  )
  SELECT ins.id, ins.kind, ins.dedupe_key FROM ins;
  IF FOUND THEN
    PERFORM pg_notify('docket_items', 'enqueued');
  END IF;
END
$$;
