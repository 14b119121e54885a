/**
 * Claim: leasing up to a batch of due items to a worker. Due items come from
 * two sources, items whose lease ran out (their worker died) and waiting
 * items; the batch is the first of their union in claim order (priority,
 * run-after, id), and a waiting keyed item is not due while an item with its
 * kind and key holds a live lease (migrations/pg/0002_claim_function.sql says
 * why, in full).
 */
import * as Now from "./clock.js"
import { CLAIM_COLUMNS } from "./columns.js"

/**
 * PostgreSQL: a server-side function (migrations/pg/0002_claim_function.sql:
 * what it does, and why a function: its plan, kept per session). $1 worker,
 * $2 limit, $3 lease in ms, $4 kinds or NULL for all.
 */
export const pg = `SELECT ${CLAIM_COLUMNS} FROM docket_claim($1::text, $2::int, $3::bigint, $4::text[])`

/**
 * SQLite: the same two sources in one UPDATE ... RETURNING: SQLite serialises
 * writers, so no two claimers can take one item. ?1 worker, ?2 limit, ?3
 * lease in ms, ?4 a JSON array of kinds or NULL for all.
 */
export const sqlite = `
UPDATE docket_items
SET state = 'running', attempts = attempts + 1, lease_seq = lease_seq + 1, claimed_by = ?1,
    lease_until = ${Now.sqlite} + ?3, updated_at = ${Now.sqlite}
WHERE id IN (
  SELECT id FROM (
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'running' AND i.lease_until <= ${Now.sqlite}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
    UNION ALL
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'waiting' AND i.run_at <= ${Now.sqlite}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
        AND (i.dedupe_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM docket_items r
          WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
            AND r.lease_until > ${Now.sqlite}))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
  ) ORDER BY priority DESC, run_at, id LIMIT ?2
)
RETURNING ${CLAIM_COLUMNS}`
