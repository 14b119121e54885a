/**
 * What the store makes of what the storage returns with what it knows of the
 * call: claimed rows as claims (the claimer's attempt budgets and lease),
 * fenced states as outcomes, and a failed statement as a typed
 * `StorageError`. (What depends on the row alone is decoded by its
 * operation, in internal/sql/.)
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { Claim, FailOutcome, ReleaseOutcome, SnoozeOutcome } from "../../Domain.js"
import { StorageError } from "../../Errors.js"
import { type ClaimRow, num } from "../sql/rows.js"

/** Maps a failed statement of `operation` to a `StorageError`. */
export const storage = (operation: string) => (cause: SqlError) => new StorageError({ operation, cause })

/**
 * A claimed row as the claim `worker` holds, with a lease of `leaseMs`. An
 * item enqueued without a budget takes its kind's in `budgets`, else `fallback`.
 */
export const toClaim = (
  row: ClaimRow,
  worker: string,
  budgets: ReadonlyMap<string, number> | undefined,
  fallback: number,
  leaseMs: number
): Claim => ({
  id: num(row.id),
  token: num(row.lease_seq),
  kind: row.kind,
  payloadJson: row.payload,
  key: row.dedupe_key,
  group: row.group_key ?? null,
  priority: num(row.priority),
  attempt: num(row.attempts),
  maxAttempts: row.max_attempts === null ? budgets?.get(row.kind) ?? fallback : num(row.max_attempts),
  runAt: num(row.run_at),
  createdAt: num(row.created_at),
  leaseUntil: num(row.lease_until),
  // The claim set the lease to its own now plus the lease.
  claimedAt: num(row.lease_until) - leaseMs,
  worker,
  lastError: row.last_error,
  snoozes: num(row.snoozes),
  traceContext: row.trace_context
})

/** Claim order: highest priority first, then run-after, then id. */
export const claimOrder = (a: Claim, b: Claim) => b.priority - a.priority || a.runAt - b.runAt || a.id - b.id

/** A failure's outcome from the state its fenced row went to (undefined: no row, the claim was stale). */
export const toFailOutcome = (state: string | undefined): FailOutcome => {
  switch (state) {
    case undefined:
      return "stale"
    case "waiting":
      return "retried"
    case "dead":
    case "cancelled":
      return state
    default:
      return "absorbed"
  }
}

/** A release's outcome from the state its fenced row went to (undefined: no row, the claim was stale). */
export const toReleaseOutcome = (state: string | undefined): ReleaseOutcome =>
  state === undefined ? "stale" : state === "waiting" ? "released" : "absorbed"

/** A snooze's outcome from the state its fenced row went to (undefined: no row, the claim was stale). */
export const toSnoozeOutcome = (state: string | undefined): SnoozeOutcome =>
  state === undefined ? "stale" : state === "waiting" ? "snoozed" : "absorbed"
