/**
 * Fail: a failed item goes back to waiting unless it has no attempts left or
 * the caller asked for dead (delay_ms null). Attempts left are checked here
 * only against a budget the enqueue gave (max_attempts_given); a default
 * budget is the claimer's to apply (its handler's maxAttempts: the claim
 * carries it, and internal/store/claims.ts asks for dead once it is spent).
 * A keyed item going back to waiting while a twin waits is absorbed by it
 * instead (./absorb.ts). Fenced by the claim's token; one row per applied
 * failure, with its outcome ("waiting", "dead" or "absorbed").
 */
import * as Absorb from "./absorb.js"
import * as Now from "./clock.js"

/** PostgreSQL: $1 ids, $2 tokens, $3 errors, $4 retry delays in ms (NULL: dead), pairwise. */
export const pg = `
WITH input AS (
  SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS c(id, seq, error, delay_ms)
), target AS (
  SELECT i.id, i.kind, i.dedupe_key, c.error, c.delay_ms,
         (c.delay_ms IS NOT NULL AND (NOT i.max_attempts_given OR i.attempts < i.max_attempts)) AS retry
  FROM docket_items i JOIN input c ON i.id = c.id AND i.lease_seq = c.seq
  WHERE i.state = 'running'
  FOR UPDATE OF i
), ${Absorb.pg({
  absorbIf: "t.retry",
  set: `SET state = CASE WHEN t.retry THEN 'waiting' ELSE 'dead' END,
      run_at = CASE WHEN t.retry THEN ${Now.pg} + t.delay_ms ELSE u.run_at END,
      last_error = t.error, claimed_by = NULL, lease_until = NULL, updated_at = ${Now.pg}`,
  outcome: "u.state"
})}`

// SQLite: the row `of` may retry as far as a budget the enqueue gave allows.
const attemptsLeft = (of: string) => `(${of}.max_attempts_given = 0 OR ${of}.attempts < ${of}.max_attempts)`

/**
 * SQLite, first (in one transaction with `sqliteUpdate`): absorbs the
 * retrying keyed items. ?1 a JSON array of [id, token, error, delayMs] rows.
 */
export const sqliteAbsorb = Absorb.sqlite(`${attemptsLeft("d")}
  AND EXISTS (SELECT 1 FROM json_each(?1) j
              WHERE j.value ->> 0 = d.id AND j.value ->> 1 = d.lease_seq AND j.value ->> 3 IS NOT NULL)`)

/** SQLite, second: the rest retry or die. The same ?1 as `sqliteAbsorb`. */
export const sqliteUpdate = `
UPDATE docket_items AS u
SET state = CASE WHEN c.delay_ms IS NOT NULL AND ${attemptsLeft("u")} THEN 'waiting' ELSE 'dead' END,
    run_at = CASE WHEN c.delay_ms IS NOT NULL AND ${attemptsLeft("u")} THEN ${Now.sqlite} + c.delay_ms ELSE u.run_at END,
    last_error = c.error, claimed_by = NULL, lease_until = NULL, updated_at = ${Now.sqlite}
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS seq, j.value ->> 2 AS error, j.value ->> 3 AS delay_ms
      FROM json_each(?1) j) AS c
WHERE u.id = c.id AND u.lease_seq = c.seq AND u.state = 'running'
RETURNING id, lease_seq, state AS outcome`
