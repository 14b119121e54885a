/**
 * Fail: a failed item goes back to waiting unless it has no attempts left or
 * the caller asked for dead (delay_ms null), or for cancelled (cancel: the
 * handler's Cancel outcome, final like dead). Attempts left are checked here
 * only against a budget the enqueue gave (max_attempts_given); a default
 * budget is the claimer's to apply (its handler's maxAttempts: the claim
 * carries it, and internal/store/claims.ts asks for dead once it is spent).
 * A keyed item going back to waiting while a twin waits is absorbed by it
 * instead (./absorb.ts). Fenced by the claim's token; one row per applied
 * failure, with its outcome ("waiting", "dead", "cancelled" or "absorbed").
 *
 * History (migration 0007): the attempt's error is appended to the item's
 * `errors` ({attempt, at, worker, error}; the worker is the claim's holder,
 * read before this update clears claimed_by), the oldest dropped past
 * MAX_ERRORS; an item that ends dead or cancelled gets its finish time.
 *
 * Retries per minute (migration 0009): every row this fail sends back to
 * waiting (or has absorbed by a waiting twin, which runs the work again) adds
 * one to its kind's row of the current minute in docket_minute_counts, in the
 * same statement (PostgreSQL) or transaction (SQLite). Only rows the fenced
 * fail changed count: a stale token, a dead or cancelled outcome count
 * nothing. Complete and claim never write the table.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Absorb from "./absorb.js"
import * as Now from "./clock.js"
import { intArray, op } from "./db.js"
import { heldSorted, pgGiven, pgHeld } from "./held.js"
import type { Fence, FencedStateRow } from "./rows.js"

/** One failure to record. */
export interface FailRow extends Fence {
  readonly error: string
  /** Delay before the retry, or null for final at once (dead, or cancelled when `cancel`). */
  readonly delayMs: number | null
  /** Cancelled (the handler's Cancel outcome) rather than retried or dead. */
  readonly cancel: boolean
}

/**
 * The operation: outcome "waiting" | "dead" | "cancelled" | "absorbed". Fails
 * with a unique violation when two rows of a batch share a key.
 */
export type ClaimFail = (rows: ReadonlyArray<FailRow>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>

/**
 * Attempt errors an item keeps (the newest). Bounded so an item retried for
 * ever (or retried dead again and again) keeps a row of bounded size.
 */
export const MAX_ERRORS = 20

// The errors of row `u` with one more entry for error `error`, at most MAX_ERRORS.
const pgAppend = (error: string) => {
  const list = "coalesce(u.errors, '[]'::jsonb)"
  return `(CASE WHEN jsonb_array_length(${list}) >= ${MAX_ERRORS} THEN ${list} - 0 ELSE ${list} END)
        || jsonb_build_array(jsonb_build_object('attempt', u.attempts, 'at', ${Now.pg}, 'worker', u.claimed_by, 'error', ${error}))`
}

const sqliteAppend = (error: string) => {
  const list = "coalesce(u.errors, '[]')"
  return `json_insert(CASE WHEN json_array_length(${list}) >= ${MAX_ERRORS} THEN json_remove(${list}, '$[0]') ELSE ${list} END,
        '$[#]', json_object('attempt', u.attempts, 'at', ${Now.sqlite}, 'worker', u.claimed_by, 'error', ${error}))`
}

// PostgreSQL: the values given for the row `of` ($3 error, $4 delay, $5 cancel),
// and whether it retries: not cancelled, a delay given, attempts left by the
// budget the enqueue gave (read from the row before this statement changes it).
const pgError = (of: string) => pgGiven(of, "$3::text[]")
const pgRetries = (of: string) => `(NOT ${pgGiven(of, "$5::boolean[]")} AND ${pgGiven(of, "$4::bigint[]")} IS NOT NULL
    AND (NOT ${of}.max_attempts_given OR ${of}.attempts < ${of}.max_attempts))`

/**
 * PostgreSQL: $1 ids, $2 tokens, $3 errors, $4 retry delays in ms (NULL: not
 * retried), $5 whether an item not retried is cancelled rather than dead,
 * pairwise (./held.ts: found by primary key; sorted by id, then token).
 */
export const pg = `
WITH target AS (
  SELECT i.id, i.kind, i.dedupe_key, ${pgRetries("i")} AS retry FROM docket_items i WHERE ${pgHeld("i")}
  FOR UPDATE OF i
), ${Absorb.pg({
  absorbIf: "t.retry",
  set: `SET state = CASE WHEN ${pgRetries("u")} THEN 'waiting' WHEN ${pgGiven("u", "$5::boolean[]")} THEN 'cancelled' ELSE 'dead' END,
      run_at = CASE WHEN ${pgRetries("u")} THEN ${Now.pg} + ${pgGiven("u", "$4::bigint[]")} ELSE u.run_at END,
      last_error = ${pgError("u")}, errors = ${pgAppend(pgError("u"))},
      finished_at = CASE WHEN ${pgRetries("u")} THEN NULL ELSE ${Now.pg} END,
      claimed_by = NULL, lease_until = NULL, updated_at = ${Now.pg}`,
  outcome: "u.state",
  // One upsert row per kind, in kind order (concurrent batches lock the rows
  // in one order: no deadlock). Unreferenced: PostgreSQL runs it all the same.
  then: `counted AS (
  INSERT INTO docket_minute_counts AS m (minute, kind, retried)
  SELECT ${Now.pg} / 60000, t.kind, count(*) FROM target t
  WHERE t.retry AND (t.id IN (SELECT id FROM updated) OR t.id IN (SELECT id FROM absorbed))
  GROUP BY t.kind ORDER BY t.kind
  ON CONFLICT (minute, kind) DO UPDATE SET retried = m.retried + excluded.retried
  RETURNING 1
)`
})}`

// SQLite: the row `of` may retry as far as a budget the enqueue gave allows.
const attemptsLeft = (of: string) => `(${of}.max_attempts_given = 0 OR ${of}.attempts < ${of}.max_attempts)`

/**
 * SQLite, first (in one transaction with `sqliteUpdate`): absorbs the
 * retrying keyed items. ?1 a JSON array of [id, token, error, delayMs,
 * cancel (1 or 0)] rows.
 */
export const sqliteAbsorb = Absorb.sqlite(`${attemptsLeft("d")}
  AND EXISTS (SELECT 1 FROM json_each(?1) j
              WHERE j.value ->> 0 = d.id AND j.value ->> 1 = d.lease_seq AND j.value ->> 3 IS NOT NULL
                AND j.value ->> 4 = 0)`)

// SQLite: the row `u` with its input `c` goes back to waiting.
const retries = `c.cancel = 0 AND c.delay_ms IS NOT NULL AND ${attemptsLeft("u")}`

/** SQLite, second: the rest retry, die or are cancelled. The same ?1 as `sqliteAbsorb`. */
export const sqliteUpdate = `
UPDATE docket_items AS u
SET state = CASE WHEN ${retries} THEN 'waiting' WHEN c.cancel = 1 THEN 'cancelled' ELSE 'dead' END,
    run_at = CASE WHEN ${retries} THEN ${Now.sqlite} + c.delay_ms ELSE u.run_at END,
    last_error = c.error, errors = ${sqliteAppend("c.error")},
    finished_at = CASE WHEN ${retries} THEN NULL ELSE ${Now.sqlite} END,
    claimed_by = NULL, lease_until = NULL, updated_at = ${Now.sqlite}
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS seq, j.value ->> 2 AS error, j.value ->> 3 AS delay_ms,
             j.value ->> 4 AS cancel
      FROM json_each(?1) j) AS c
WHERE u.id = c.id AND u.lease_seq = c.seq AND u.state = 'running'
RETURNING id, lease_seq, state AS outcome, kind`

/**
 * SQLite, third (in the same transaction, only when the two before retried
 * any): ?1 a JSON array of the kinds of the rows they sent back to waiting or
 * absorbed, one entry per row; adds them to the current minute's counts.
 * (`WHERE true`: an upsert's SELECT needs a WHERE before ON CONFLICT.)
 */
export const sqliteCountRetries = `
INSERT INTO docket_minute_counts (minute, kind, retried)
SELECT ${Now.sqlite} / 60000, j.value, count(*) FROM json_each(?1) j WHERE true
GROUP BY j.value
ON CONFLICT (minute, kind) DO UPDATE SET retried = retried + excluded.retried`

/** `claimFail` for a dialect. */
export const make = op<ClaimFail>({
  pg: ({ run }) => (given) => {
    const rows = heldSorted(given)
    return run<FencedStateRow>(pg, [
      intArray(rows.map((r) => r.id)),
      intArray(rows.map((r) => r.token)),
      rows.map((r) => r.error),
      intArray(rows.map((r) => r.delayMs)),
      `{${rows.map((r) => (r.cancel ? "t" : "f")).join(",")}}`
    ])
  },
  // Fail in one transaction: absorb, update, then count the rows they sent
  // back to waiting (their kinds came back with them) in the minute's counts.
  sqlite: ({ run, transaction }) => (rows) => {
    const json = JSON.stringify(rows.map((r) => [r.id, r.token, r.error, r.delayMs, r.cancel ? 1 : 0]))
    type Row = FencedStateRow & { readonly kind: string }
    return transaction(Effect.gen(function*() {
      const changed = [...yield* run<Row>(sqliteAbsorb, [json]), ...yield* run<Row>(sqliteUpdate, [json])]
      const retried = changed.filter((r) => r.outcome === "waiting" || r.outcome === "absorbed").map((r) => r.kind)
      if (retried.length > 0) yield* run(sqliteCountRetries, [JSON.stringify(retried)])
      return changed.map((r): FencedStateRow => ({ id: r.id, lease_seq: r.lease_seq, outcome: r.outcome }))
    }))
  }
})
