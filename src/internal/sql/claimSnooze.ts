/**
 * Snooze: the handler asked for the item back later. It waits again, due
 * after its delay on the database's clock, this attempt not counted (as a
 * release) and its `snoozes` one higher (the cap on snoozes is the worker's
 * to apply: it knows the kind's handler, and asks for dead instead once it is
 * reached). A keyed item whose twin waits is absorbed by it instead
 * (./absorb.ts), as a release is. Fenced by the claim's token; one row per
 * applied snooze, with its outcome ("waiting" or "absorbed").
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import * as Absorb from "./absorb.js"
import * as Release from "./claimRelease.js"
import * as Now from "./clock.js"
import { bothInOne, intArray, op } from "./db.js"
import { heldSorted, pgGiven, pgHeld } from "./held.js"
import type { Fence, FencedStateRow } from "./rows.js"

/** One snooze to record. */
export interface SnoozeRow extends Fence {
  /** Checked: from 0 to MAX_DELAY_MS (internal/validate.ts). */
  readonly delayMs: number
}

/** The operation: outcome "waiting" | "absorbed". Fails with a unique violation when two rows of a batch share a key. */
export type ClaimSnooze = (rows: ReadonlyArray<SnoozeRow>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>

/** PostgreSQL: $1 ids, $2 tokens, $3 delays in ms, pairwise (./held.ts: found by primary key; sorted by id, then token). */
export const pg = `
WITH target AS (
  SELECT i.id, i.kind, i.dedupe_key FROM docket_items i WHERE ${pgHeld("i")}
  FOR UPDATE OF i
), ${Absorb.pg({
  set: `SET state = 'waiting', run_at = ${Now.pg} + ${pgGiven("u", "$3::bigint[]")}, attempts = greatest(u.attempts - 1, 0),
      snoozes = u.snoozes + 1, claimed_by = NULL, lease_until = NULL, updated_at = ${Now.pg}`,
  outcome: "'waiting'"
})}`

/**
 * SQLite, first (in one transaction with `sqliteUpdate`): ?1 a JSON array of
 * [id, token, delayMs] rows. Release's own statement: it reads only the first
 * two elements of each row, the fence, so one text (and one prepared
 * statement) serves both.
 */
export const sqliteAbsorb = Release.sqliteAbsorb

/** SQLite, second: the rest wait again, due after their delays. The same ?1 as `sqliteAbsorb`. */
export const sqliteUpdate = `
UPDATE docket_items AS u
SET state = 'waiting', run_at = ${Now.sqlite} + c.delay_ms, attempts = max(u.attempts - 1, 0),
    snoozes = u.snoozes + 1, claimed_by = NULL, lease_until = NULL, updated_at = ${Now.sqlite}
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS seq, j.value ->> 2 AS delay_ms FROM json_each(?1) j) AS c
WHERE u.id = c.id AND u.lease_seq = c.seq AND u.state = 'running'
RETURNING id, lease_seq, 'waiting' AS outcome`

/** `claimSnooze` for a dialect. */
export const make = op<ClaimSnooze>({
  pg: ({ run }) => (given) => {
    const rows = heldSorted(given)
    return run<FencedStateRow>(pg, [
      intArray(rows.map((r) => r.id)),
      intArray(rows.map((r) => r.token)),
      intArray(rows.map((r) => r.delayMs))
    ])
  },
  sqlite: (db) => (rows) => {
    const json = JSON.stringify(rows.map((r) => [r.id, r.token, r.delayMs]))
    return bothInOne(db, db.run<FencedStateRow>(sqliteAbsorb, [json]), db.run<FencedStateRow>(sqliteUpdate, [json]))
  }
})
