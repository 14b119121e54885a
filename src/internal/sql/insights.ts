/**
 * The read model of a dashboard and of /metrics (internal/store/insights.ts),
 * and moving scheduled items to now ("run now"). Each text is constant with
 * positional parameters; the two dialects differ in marks and the clock.
 *
 * Cost, by statement:
 * - oldestDue: the waiting and the running items (the claim's and the lease's
 *   partial indexes), grouped by kind; finished items are not read.
 * - finishedPerMinute: a range of docket_items_finished (state, finished_at,
 *   id) per finished state, and on PostgreSQL of docket_done_finished
 *   (finished_at, id): only the items finished in the window.
 * - retriedPerMinute: a range of docket_minute_counts' key (minute, kind):
 *   at most one row per kind and minute of the window (migration 0009).
 * - searchFloor, search: the primary key walked backwards from the cursor, at
 *   most SEARCH_SCAN_CAP rows per page whatever the filters (a text search
 *   cannot use an index; bounding the rows it reads bounds its cost).
 */
import * as Now from "./clock.js"
import { ITEM_COLUMNS } from "./columns.js"
import { NOTIFY_CHANNEL } from "./notify.js"

/** The most rows one search page reads (below its cursor, newest first). */
export const SEARCH_SCAN_CAP = 10_000

const oldestDue = (now: string) => `
SELECT kind, ${now} - min(due_at) AS age_ms, count(*) AS n FROM (
  SELECT kind, run_at AS due_at FROM docket_items WHERE state = 'waiting' AND run_at <= ${now}
  UNION ALL
  SELECT kind, lease_until AS due_at FROM docket_items WHERE state = 'running' AND lease_until <= ${now}
) due
GROUP BY kind ORDER BY kind`

// The minute is the finish time rounded down to a whole minute (epoch ms).
const finishedPerMinute = (now: string, windowMs: string) => `
SELECT kind, state, (finished_at / 60000) * 60000 AS minute, count(*) AS n
FROM docket_items_all
WHERE state IN ('done', 'dead', 'cancelled') AND finished_at IS NOT NULL AND finished_at >= ${now} - ${windowMs}
GROUP BY kind, state, (finished_at / 60000) * 60000
ORDER BY minute, kind, state`

// The minute as finishedPerMinute gives it (its start, epoch ms); the table keeps epoch minutes.
const retriedPerMinute = (now: string, windowMs: string) => `
SELECT kind, minute * 60000 AS minute, retried AS n
FROM docket_minute_counts
WHERE minute >= (${now} - ${windowMs}) / 60000 AND retried > 0
ORDER BY minute, kind`

// The lowest id of the window a page reads, and how many rows it holds.
const searchFloor = (before: string, cap: string) => `
SELECT min(id) AS floor, count(*) AS n FROM (
  SELECT id FROM docket_items_all WHERE id < ${before} ORDER BY id DESC LIMIT ${cap}
) recent`

interface SearchMarks {
  readonly before: string
  readonly floor: string
  readonly state: string
  readonly kind: string
  readonly key: string
  readonly text: string
  readonly limit: string
}

// The state as `list` reads it: waiting is due now, scheduled due later.
// The text is matched case-insensitively in the payload and the last error.
const search = (m: SearchMarks, now: string, position: (hay: string, needle: string) => string) => `
SELECT ${ITEM_COLUMNS} FROM docket_items_all
WHERE id < ${m.before} AND id >= ${m.floor}
  AND (${m.state} IS NULL
    OR (${m.state} = 'waiting' AND state = 'waiting' AND run_at <= ${now})
    OR (${m.state} = 'scheduled' AND state = 'waiting' AND run_at > ${now})
    OR (${m.state} NOT IN ('waiting', 'scheduled') AND state = ${m.state}))
  AND (${m.kind} IS NULL OR kind = ${m.kind})
  AND (${m.key} IS NULL OR dedupe_key = ${m.key})
  AND (${m.text} IS NULL OR ${position("lower(payload)", `lower(${m.text})`)} > 0
    OR ${position("lower(coalesce(last_error, ''))", `lower(${m.text})`)} > 0)
ORDER BY id DESC
LIMIT ${m.limit}`

/** PostgreSQL texts. */
export const pg = {
  /** Per kind: the oldest due item's age (ms) and the due count. */
  oldestDue: oldestDue(Now.pg),
  /** $1 the window in ms: finished items per (kind, state, minute). */
  finishedPerMinute: finishedPerMinute(Now.pg, "$1::bigint"),
  /** $1 the window in ms: retried attempts per (kind, minute). */
  retriedPerMinute: retriedPerMinute(Now.pg, "$1::bigint"),
  /** $1 the cursor's id, $2 the cap. */
  searchFloor: searchFloor("$1::bigint", "$2"),
  /** $1 cursor id, $2 floor, $3 state, $4 kind, $5 key, $6 text (each NULL for any), $7 the page size. */
  search: search(
    { before: "$1::bigint", floor: "$2::bigint", state: "$3::text", kind: "$4::text", key: "$5::text", text: "$6::text", limit: "$7" },
    Now.pg,
    (hay, needle) => `strpos(${hay}, ${needle})`
  ),
  /** $1 the ids: scheduled ones become due now; notifies idle pools. */
  runNow: `
WITH moved AS (
  UPDATE docket_items SET run_at = ${Now.pg}, updated_at = ${Now.pg}
  WHERE id = ANY($1::bigint[]) AND state = 'waiting' AND run_at > ${Now.pg}
  RETURNING id
)
SELECT id, (SELECT pg_notify('${NOTIFY_CHANNEL}', 'run-now')) IS NULL AS notified FROM moved`
}

/** SQLite texts: the same parameters, numbered ?N (runNow: a JSON array of ids). */
export const sqlite = {
  oldestDue: oldestDue(Now.sqlite),
  finishedPerMinute: finishedPerMinute(Now.sqlite, "?1"),
  retriedPerMinute: retriedPerMinute(Now.sqlite, "?1"),
  searchFloor: searchFloor("?1", "?2"),
  search: search(
    { before: "?1", floor: "?2", state: "?3", kind: "?4", key: "?5", text: "?6", limit: "?7" },
    Now.sqlite,
    (hay, needle) => `instr(${hay}, ${needle})`
  ),
  runNow: `
UPDATE docket_items SET run_at = ${Now.sqlite}, updated_at = ${Now.sqlite}
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'waiting' AND run_at > ${Now.sqlite}
RETURNING id`
}
