/**
 * Fencing: every change after a claim presents the claim's id and token, and
 * the statement applies only to the item that still holds that token. Results
 * are matched back to claims here; two items of one batch that share a key
 * are resolved by withTwinFallback.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Claim } from "../../Domain.js"
import { type Fence, type FencedRow, type FencedStateRow, num } from "../sql/rows.js"
import type { Storage } from "../storage.js"

/** What a change after `claim` presents. */
export const fence = (claim: Claim): Fence => ({ id: claim.id, token: claim.token })

/**
 * The key results are matched to claims by: id AND token, as one pool may
 * hold two claims of one item (it claimed back an item whose lease ran out
 * while it ran it), and only the current one may count as applied.
 */
export const fenceKey = (id: number, token: number) => `${id}:${token}`

/** For each claim, in order: did the change apply to it (a row came back for its id and token)? */
export const applied = (claims: ReadonlyArray<Claim>, rows: ReadonlyArray<FencedRow>): ReadonlyArray<boolean> => {
  const set = new Set(rows.map((r) => fenceKey(num(r.id), num(r.lease_seq))))
  return claims.map((c) => set.has(fenceKey(c.id, c.token)))
}

/**
 * Applies a batch of fenced changes of state (fail, release); returns each
 * applied row's new state by fenceKey.
 *
 * Two items of one batch that share a key cannot both go back to waiting in
 * one statement (the unique index refuses the second). Then the batch is
 * applied one item at a time, in order: the first waits, the rest are
 * absorbed by it. A concurrent enqueue of the key can cause the same refusal;
 * the per-item retry resolves that too.
 */
export const withTwinFallback = <Row extends Fence>(
  storage: Pick<Storage, "isUniqueViolation">,
  rows: ReadonlyArray<Row>,
  apply: (rows: ReadonlyArray<Row>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>
): Effect.Effect<Map<string, string>, SqlError> => {
  const collect = (result: ReadonlyArray<FencedStateRow>) =>
    new Map(result.map((r) => [fenceKey(num(r.id), num(r.lease_seq)), r.outcome]))
  const one = (row: Row, attemptsLeft: number): Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError> =>
    apply([row]).pipe(
      Effect.catchIf(
        (error) => attemptsLeft > 0 && storage.isUniqueViolation(error),
        () => one(row, attemptsLeft - 1)
      )
    )
  return apply(rows).pipe(
    Effect.map(collect),
    Effect.catchIf(
      (error) => storage.isUniqueViolation(error),
      () => Effect.map(Effect.forEach(rows, (row) => one(row, 3)), (results) => collect(results.flat()))
    )
  )
}
