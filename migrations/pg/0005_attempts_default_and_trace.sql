-- Two columns, and the single enqueue's function with the parameter for the
-- second.
--
-- max_attempts_given: whether the enqueue gave the item's max attempts. When
-- it did not (false), the worker that claims the item decides its budget: its
-- handler's maxAttempts, else the queue's default (8), so a handler's budget
-- applies to every item of its kind, whoever enqueued it. max_attempts then
-- holds 8, what workers of earlier versions read (they know no flag), so
-- during a rolling upgrade an item enqueued by this version is safe with an
-- older worker: a NULL max_attempts would read as 0 there, and that worker
-- would fail the item dead at once. Items stored before this migration keep
-- the budget they were given (DEFAULT true): every earlier enqueue wrote one.
--
-- trace_context: the enqueuer's span context as a W3C traceparent
-- (00-<trace id>-<span id>-<flags>), stored only when the enqueue ran under an
-- application's tracer (else NULL); the worker links the item's run span to
-- it, so a trace reads request -> enqueue -> run across processes.
--
-- Both are metadata-only changes (a constant default, a nullable column): no
-- table rewrite, no lock held beyond the catalog's. docket_claim returns
-- SETOF docket_items, so it returns the new columns unchanged.
ALTER TABLE docket_items
  ADD COLUMN max_attempts_given boolean NOT NULL DEFAULT true,
  ADD COLUMN trace_context text;

-- As docket_enqueue_one of 0003 (read the comments there), with the span
-- context as an eighth argument, and max_attempts NULL when not given. The
-- seven-argument function stays for processes of the previous version during
-- an upgrade (their items keep the budget they computed, as before).
--
-- Arguments: kind, payload (JSON text), dedupe key or NULL, priority,
-- run_at (epoch ms) or NULL, delay in ms (used when run_at is NULL),
-- max_attempts or NULL (not given), traceparent or NULL.
CREATE FUNCTION docket_enqueue_one(text, text, text, integer, bigint, bigint, integer, text)
  RETURNS TABLE (new_id bigint, new_kind text, new_key text)
  LANGUAGE plpgsql
  AS $$
BEGIN
  RETURN QUERY
  WITH ins AS (
    INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, max_attempts_given,
                              trace_context, created_at, updated_at)
    VALUES ($1, $2, $3, $4, coalesce($5, docket_now_ms() + $6), coalesce($7, 8), $7 IS NOT NULL,
            $8, docket_now_ms(), docket_now_ms())
    ON CONFLICT DO NOTHING
    RETURNING docket_items.id, docket_items.kind, docket_items.dedupe_key
  )
  SELECT ins.id, ins.kind, ins.dedupe_key FROM ins;
  IF FOUND THEN
    PERFORM pg_notify('docket_items', 'enqueued');
  END IF;
END
$$;
