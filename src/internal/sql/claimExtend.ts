/**
 * Extend: renews a running item's lease for the given length from the
 * database's now. Fenced by the claim's token; each row returned is one renewed.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { fencesJson, intArray, op } from "./db.js"
import { heldSorted, pgHeld } from "./held.js"
import type { Fence, FencedRow } from "./rows.js"

/** The operation: renews the leases for `leaseMs` from the database's now; a row per lease renewed. */
export type ClaimExtend = (fences: ReadonlyArray<Fence>, leaseMs: number) => Effect.Effect<ReadonlyArray<FencedRow>, SqlError>

/** PostgreSQL: $1 ids, $2 tokens, pairwise (./held.ts: found by primary key; sorted by id, then token); $3 the lease in ms. */
export const pg = `
UPDATE docket_items i SET lease_until = ${Now.pg} + $3, updated_at = ${Now.pg}
WHERE ${pgHeld("i")}
RETURNING i.id, i.lease_seq`

/** SQLite: ?1 a JSON array of [id, token] pairs; ?2 the lease in ms. */
export const sqlite = `
UPDATE docket_items SET lease_until = ${Now.sqlite} + ?2, updated_at = ${Now.sqlite}
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq`

/** `claimExtend` for a dialect. */
export const make = op<ClaimExtend>({
  pg: ({ run }) => (given, leaseMs) => {
    const fences = heldSorted(given)
    return run<FencedRow>(pg, [intArray(fences.map((f) => f.id)), intArray(fences.map((f) => f.token)), leaseMs])
  },
  sqlite: ({ run }) => (fences, leaseMs) => run<FencedRow>(sqlite, [fencesJson(fences), leaseMs])
})
