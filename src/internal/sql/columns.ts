/**
 * The column lists statements return, the same in both dialects: they are the
 * row shapes of internal/rows.ts.
 */

/** Every column of an item (`ItemRow`): what item-returning statements select. */
export const ITEM_COLUMNS =
  "id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error, claimed_by, lease_until, lease_seq, created_at, updated_at"

/** The columns of `ClaimRow`: what a run needs (state, claimer and update time are known). */
export const CLAIM_COLUMNS =
  "id, kind, payload, dedupe_key, priority, run_at, attempts, max_attempts, last_error, lease_until, lease_seq, created_at"
