/**
 * Release: the item goes back to waiting unrun, this attempt not counted (a
 * worker shutting down gives back what it holds). A keyed item whose twin
 * waits is absorbed by it instead (./absorb.ts). Fenced by the claim's token;
 * one row per applied release, with its outcome ("waiting" or "absorbed").
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import * as Absorb from "./absorb.js"
import * as Now from "./clock.js"
import { bothInOne, fencesJson, intArray, op } from "./db.js"
import { heldSorted, pgHeld } from "./held.js"
import type { Fence, FencedStateRow } from "./rows.js"

/** The operation: outcome "waiting" | "absorbed". */
export type ClaimRelease = (fences: ReadonlyArray<Fence>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>

/** PostgreSQL: $1 ids, $2 tokens, pairwise (./held.ts: found by primary key; sorted by id, then token). */
export const pg = `
WITH target AS (
  SELECT i.id, i.kind, i.dedupe_key FROM docket_items i WHERE ${pgHeld("i")}
  FOR UPDATE OF i
), ${Absorb.pg({
  set: `SET state = 'waiting', attempts = greatest(u.attempts - 1, 0), claimed_by = NULL, lease_until = NULL,
      updated_at = ${Now.pg}`,
  outcome: "'waiting'"
})}`

/** SQLite, first (in one transaction with `sqliteUpdate`): ?1 a JSON array of [id, token] pairs. */
export const sqliteAbsorb = Absorb.sqlite("(d.id, d.lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)")

/** SQLite, second: the rest wait again. The same ?1 as `sqliteAbsorb`. */
export const sqliteUpdate = `
UPDATE docket_items
SET state = 'waiting', attempts = max(attempts - 1, 0), claimed_by = NULL, lease_until = NULL, updated_at = ${Now.sqlite}
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq, 'waiting' AS outcome`

/** `claimRelease` for a dialect. */
export const make = op<ClaimRelease>({
  pg: ({ run }) => (given) => {
    const fences = heldSorted(given)
    return run<FencedStateRow>(pg, [intArray(fences.map((f) => f.id)), intArray(fences.map((f) => f.token))])
  },
  sqlite: (db) => (fences) => {
    const json = fencesJson(fences)
    return bothInOne(db, db.run<FencedStateRow>(sqliteAbsorb, [json]), db.run<FencedStateRow>(sqliteUpdate, [json]))
  }
})
