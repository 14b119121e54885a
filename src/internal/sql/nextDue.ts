/**
 * Next due: milliseconds from the database's now until a waiting item not yet
 * due becomes due or a lease ends (negative if one has ended), in `wait_ms`.
 *
 * The next waiting item not yet due is found through docket_items_scheduled
 * (migrations/pg/0004_scheduled_index.sql, migrations/sqlite/0004_scheduled_index.sql):
 * such an item has run_at > now >= created_at, so the index's predicate holds
 * for it; items already due are the claim's, not the wait's.
 */
import * as Now from "./clock.js"

/** PostgreSQL: NULL when there is neither. */
export const pg = `
SELECT least(
  (SELECT min(run_at) FROM docket_items
   WHERE state = 'waiting' AND run_at > created_at AND run_at > ${Now.pg}),
  (SELECT min(lease_until) FROM docket_items WHERE state = 'running')
) - ${Now.pg} AS wait_ms`

/**
 * SQLite: its min(a, b) is NULL when either is (PostgreSQL's least skips
 * NULLs), so each side is capped instead: about 9e15 when there is neither.
 */
export const sqlite = `
SELECT min(
  coalesce((SELECT min(run_at) FROM docket_items
            WHERE state = 'waiting' AND run_at > created_at AND run_at > ${Now.sqlite}), 9007199254740991),
  coalesce((SELECT min(lease_until) FROM docket_items WHERE state = 'running'), 9007199254740991)
) - ${Now.sqlite} AS wait_ms`
