/**
 * The PostgreSQL channels. Notifications are sent with `pg_notify` inside the
 * statement that makes the change, so they are delivered when its
 * transaction commits (and not at all if it rolls back).
 */

/** Enqueues (and retries of dead items) notify here; idle worker pools listen, to claim at once. */
export const NOTIFY_CHANNEL = "docket_items"

/**
 * A cancel of running items notifies here, its payload the ids, comma
 * separated: the pools listening stop their runs of those items at once
 * (a channel of its own, so a cancel wakes no claimer, and pools of earlier
 * versions, which do not listen here, are not woken for nothing).
 */
export const CANCEL_CHANNEL = "docket_cancel"

/**
 * The most ids in one cancel notification: a payload must stay under 8000
 * bytes, and an id is at most 19 digits and a comma (300 x 20 = 6000).
 */
export const CANCEL_IDS_PER_NOTICE = 300

/** The ids of a cancel notice (comma separated, as sql/itemCancelMany.ts sends them); anything else in it is ignored. */
export const parseCancelIds = (payload: string): ReadonlyArray<number> =>
  payload.split(",").map(Number).filter((id) => Number.isSafeInteger(id) && id > 0)

/**
 * A workflow execution's completion notifies here, its payload the execution
 * id: a process waiting for that execution's result (`execute` without
 * `discard`) reads it at once (src/internal/workflow/waiters.ts). Shorter
 * than `docket_cancel`, so the longest schema name stays as it was.
 */
export const WORKFLOW_CHANNEL = "docket_wf"
