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
 * what it does, and why a function: its plan, kept per session;
 * migrations/pg/0006_control.sql: how it obeys paused and limited kinds).
 * $1 worker, $2 limit, $3 lease in ms, $4 kinds or NULL for all, $5 the most
 * items of limited kinds.
 */
export const pg = `SELECT ${CLAIM_COLUMNS} FROM docket_claim($1::text, $2::int, $3::bigint, $4::text[], $5::int)`

/**
 * SQLite: the same two sources in one UPDATE ... RETURNING: SQLite serialises
 * writers, so no two claimers can take one item. ?1 worker, ?2 limit, ?3
 * lease in ms, ?4 a JSON array of kinds or NULL for all, ?5 1 to leave out the
 * controlled kinds (paused or limited: read by the statement itself, so a
 * kind paused or limited a moment ago is left out too), 0 to claim a limited
 * kind on its own (internal/sqliteClaim.ts).
 */
export const sqlite = `
WITH controlled AS (
  SELECT kind FROM docket_kinds WHERE paused OR concurrency IS NOT NULL OR rate_limit IS NOT NULL)
UPDATE docket_items
SET state = 'running', attempts = attempts + 1, lease_seq = lease_seq + 1, claimed_by = ?1,
    lease_until = ${Now.sqlite} + ?3, updated_at = ${Now.sqlite}
WHERE id IN (
  SELECT id FROM (
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'running' AND i.lease_until <= ${Now.sqlite}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
        AND (?5 = 0 OR i.kind NOT IN (SELECT kind FROM controlled))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
    UNION ALL
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'waiting' AND i.run_at <= ${Now.sqlite}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
        AND (?5 = 0 OR i.kind NOT IN (SELECT kind FROM controlled))
        AND (i.dedupe_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM docket_items r
          WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
            AND r.lease_until > ${Now.sqlite}))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
  ) ORDER BY priority DESC, run_at, id LIMIT ?2
)
RETURNING ${CLAIM_COLUMNS}`


/**
 * SQLite, first in a claim's transaction: the controlled kinds among those
 * claimed (paused, or limited), each limited one with what it may start now
 * (its concurrency less the items holding a live lease; its rate slots free),
 * read under the transaction's write lock, so no other claim can change them
 * before this one commits. ?1 a JSON array of kinds or NULL for all.
 */
export const sqliteControls = `
SELECT k.kind, k.paused, k.rate_limit,
  CASE WHEN k.concurrency IS NULL THEN NULL ELSE k.concurrency - (
    SELECT count(*) FROM docket_items r
    WHERE r.state = 'running' AND r.kind = k.kind AND r.lease_until > ${Now.sqlite}) END AS concurrency_left,
  CASE WHEN k.rate_limit IS NULL THEN NULL ELSE (
    SELECT count(*) FROM docket_kind_slots s
    WHERE s.kind = k.kind AND s.started_at <= ${Now.sqlite} - k.rate_period_ms) END AS rate_left
FROM docket_kinds k
WHERE (k.paused OR k.concurrency IS NOT NULL OR k.rate_limit IS NOT NULL)
  AND (?1 IS NULL OR k.kind IN (SELECT value FROM json_each(?1)))
ORDER BY k.kind`

/**
 * SQLite, after a rate-limited kind's claim in the same transaction: its ?2
 * oldest slots take this start's time (migrations/pg/0006_control.sql says
 * why that keeps the rate exact). ?1 kind, ?2 items claimed.
 */
export const sqliteTakeSlots = `
UPDATE docket_kind_slots SET started_at = ${Now.sqlite}
WHERE kind = ?1 AND slot IN (
  SELECT slot FROM docket_kind_slots WHERE kind = ?1 ORDER BY started_at, slot LIMIT ?2)`
