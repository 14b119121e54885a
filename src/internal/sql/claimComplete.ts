/**
 * Complete: a done item is kept as 'done' for the queue's retention (its
 * result and finish time written, claimed_by kept: who ran it), or deleted at
 * once when the retention of done items is 0 (the behaviour before 0007).
 * Fenced: only a running item whose token (lease_seq) the claim presents is
 * changed; each row returned is one that was.
 *
 * PostgreSQL keeps a done item by moving it to docket_done in one statement
 * (a DELETE and an INSERT: no item is ever in both tables or in neither);
 * marking it done in place cost W2 13-16% against deleting it, moving it 5-8%
 * (18% where two worker processes and the database saturate two cores:
 * docs/benchmarks.md, "The cost of history"). SQLite marks it in place (2-4%).
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { fencesJson, intArray, op } from "./db.js"
import { heldSorted, pgGiven, pgHeld } from "./held.js"
import type { Fence, FencedRow } from "./rows.js"

/** One completion to record: its result as JSON text, or null for none. */
export interface CompleteRow extends Fence {
  readonly result: string | null
}

/**
 * The operation: `keep` (a retention of done items above 0) keeps each row as
 * 'done' with its result and finish time; else deletes it. A row per change applied.
 */
export type ClaimComplete = (rows: ReadonlyArray<CompleteRow>, keep: boolean) => Effect.Effect<ReadonlyArray<FencedRow>, SqlError>

/** PostgreSQL, retention 0: $1 ids, $2 tokens, pairwise (./held.ts: found by primary key; sorted by id, then token). */
export const pgDelete = `
DELETE FROM docket_items i WHERE ${pgHeld("i")}
RETURNING i.id, i.lease_seq`

/**
 * PostgreSQL, kept: $1 ids, $2 tokens, $3 results (JSON text, NULL for none),
 * pairwise (./held.ts); $3 may be NULL for a batch without results. The
 * row leaves docket_items and enters docket_done with its result, its finish
 * time and who ran it (claimed_by); the clock is read once per statement.
 */
export const pgKeep = `
WITH now AS (SELECT ${Now.pg} AS ms),
moved AS (
  DELETE FROM docket_items i WHERE ${pgHeld("i")}
  RETURNING i.id, i.kind, i.payload, i.dedupe_key, i.priority, i.run_at, i.attempts, i.max_attempts, i.last_error,
    i.claimed_by, i.lease_seq, i.created_at, i.max_attempts_given, i.trace_context, i.snoozes,
    ${pgGiven("i", "$3::text[]")} AS result, i.errors, i.group_key
)
INSERT INTO docket_done (id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error,
  claimed_by, lease_until, lease_seq, created_at, updated_at, max_attempts_given, trace_context, snoozes,
  finished_at, result, errors, group_key)
SELECT m.id, m.kind, m.payload, m.dedupe_key, m.priority, 'done', m.run_at, m.attempts, m.max_attempts, m.last_error,
  m.claimed_by, NULL, m.lease_seq, m.created_at, now.ms, m.max_attempts_given, m.trace_context, m.snoozes,
  now.ms, m.result, m.errors, m.group_key
FROM moved m, now
RETURNING id, lease_seq`

/** SQLite, retention 0: ?1 a JSON array of [id, token] pairs. */
export const sqliteDelete = `
DELETE FROM docket_items
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq`

/** SQLite, kept: ?1 a JSON array of [id, token, result (JSON text or null)] rows. */
export const sqliteKeep = `
UPDATE docket_items AS u
SET state = 'done', result = c.result, finished_at = ${Now.sqlite}, lease_until = NULL, updated_at = ${Now.sqlite}
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS seq, j.value ->> 2 AS result FROM json_each(?1) j) AS c
WHERE u.id = c.id AND u.lease_seq = c.seq AND u.state = 'running'
RETURNING id, lease_seq`

/** `claimComplete` for a dialect. */
export const make = op<ClaimComplete>({
  pg: ({ run }) => (given, keep) => {
    const rows = heldSorted(given)
    const ids = intArray(rows.map((f) => f.id))
    const tokens = intArray(rows.map((f) => f.token))
    if (!keep) return run<FencedRow>(pgDelete, [ids, tokens])
    // No results in the batch (the common case): a NULL array (each row's
    // result is then NULL), instead of an array of NULLs for the driver to encode.
    const results = rows.some((r) => r.result !== null) ? rows.map((r) => r.result) : null
    return run<FencedRow>(pgKeep, [ids, tokens, results])
  },
  sqlite: ({ run }) => (rows, keep) =>
    keep
      ? run<FencedRow>(sqliteKeep, [JSON.stringify(rows.map((r) => [r.id, r.token, r.result]))])
      : run<FencedRow>(sqliteDelete, [fencesJson(rows)])
})
