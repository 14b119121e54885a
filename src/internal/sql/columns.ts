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

const UNTRACED = new Map<string, string>()

/**
 * A claim's text for a pool that makes no spans (issue 34): the item's stored
 * trace context is not read (NULL in its place), since only a run's span links
 * to it. `text` holds `CLAIM_COLUMNS` once; the result is kept, so each text
 * is made once.
 */
export const untraced = (text: string): string => {
  let found = UNTRACED.get(text)
  if (found === undefined) {
    if (!text.includes(CLAIM_COLUMNS)) throw new Error("untraced: the text does not select CLAIM_COLUMNS")
    found = text.replace(CLAIM_COLUMNS, CLAIM_COLUMNS.replace("trace_context", "NULL AS trace_context"))
    UNTRACED.set(text, found)
  }
  return found
}

/** The claim's text as `traceContext` asks: with the stored trace context, or without it. */
export const claimText = (text: string, traceContext: boolean): string => (traceContext ? text : untraced(text))

/** The columns of the live-workers table (docket_workers), as a heartbeat writes them and the listing reads them. */
export const WORKER_COLUMNS = "id, name, host, pid, kinds, concurrency, running, version, started_at, heartbeat_at"
