-- The single enqueue notifies the channel it is given, so that queues in two
-- schemas of one database do not wake each other's workers.
--
-- Since Database.Options.schema, Docket's objects may live in a schema other
-- than public, and its workers listen on that schema's own channels
-- (src/internal/pgSchema.ts: "docket.docket_items" for a schema named docket;
-- in public the channel stays docket_items, where workers of earlier releases
-- listen). docket_enqueue_one (0005, 0014) notifies docket_items whatever its
-- schema. This one takes the channel as its ninth argument, as Docket's batch
-- inserts already name theirs in their text; otherwise it is 0014's, with the
-- same plan. The 8-argument function stays, unchanged, for processes of the
-- release before this one (they know only public and its channel).
--
-- In a schema other than public, Docket's migrator also sets `search_path`
-- on every function it made (docket_now_ms aside: a SET clause would keep it
-- from being inlined), after each migration: see src/Migrations.ts. Public's
-- functions stay as they were.
CREATE FUNCTION docket_enqueue_one(text, text, text, integer, bigint, bigint, integer, text, text)
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
    PERFORM pg_notify($9, 'enqueued');
  END IF;
END
$$;
