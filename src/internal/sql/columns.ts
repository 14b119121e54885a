/**
 * The column lists statements return, the same in both dialects: they are the
 * row shapes of ./rows.ts.
 */

// max_attempts as the rows carry it: NULL when the enqueue gave none (the
// claimer then decides: the kind's handler, else the default). The column
// itself then holds 8, for workers of earlier versions
// (migrations/*/0005_attempts_default_and_trace.sql says why).
const MAX_ATTEMPTS = "CASE WHEN max_attempts_given THEN max_attempts END AS max_attempts"

/** Every column of an item (`ItemRow`): what item-returning statements select. */
export const ITEM_COLUMNS =
  `id, kind, payload, dedupe_key, priority, state, run_at, attempts, ${MAX_ATTEMPTS}, last_error, claimed_by, lease_until, lease_seq, created_at, updated_at, trace_context, snoozes, finished_at, result, errors, group_key`

/** The columns of `ClaimRow`: what a run needs (state, claimer and update time are known). */
export const CLAIM_COLUMNS =
  `id, kind, payload, dedupe_key, priority, run_at, attempts, ${MAX_ATTEMPTS}, last_error, lease_until, lease_seq, created_at, trace_context, snoozes, group_key`

/** The columns of the live-workers table (docket_workers), as a heartbeat writes them and the listing reads them. */
export const WORKER_COLUMNS = "id, name, host, pid, kinds, concurrency, running, version, started_at, heartbeat_at"
