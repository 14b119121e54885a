/**
 * Stats: per kind, how many items are due (waiting and due, or running with
 * an ended lease), scheduled (waiting, not yet due), running (a live lease),
 * done (kept for the retention), dead and cancelled, over docket_items_all
 * (every item: on PostgreSQL done ones are in docket_done). One text for both
 * dialects but for the clock expression.
 */
import * as Now from "./clock.js"

const statsSql = (now: string) => `
SELECT kind,
  sum(CASE WHEN (state = 'waiting' AND run_at <= ${now}) OR (state = 'running' AND lease_until <= ${now}) THEN 1 ELSE 0 END) AS due,
  sum(CASE WHEN state = 'waiting' AND run_at > ${now} THEN 1 ELSE 0 END) AS scheduled,
  sum(CASE WHEN state = 'running' AND lease_until > ${now} THEN 1 ELSE 0 END) AS running,
  sum(CASE WHEN state = 'done' THEN 1 ELSE 0 END) AS done,
  sum(CASE WHEN state = 'dead' THEN 1 ELSE 0 END) AS dead,
  sum(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled
FROM docket_items_all GROUP BY kind ORDER BY kind`

/** PostgreSQL: one `StatsRow` per kind. */
export const pg = statsSql(Now.pg)

/** SQLite: one `StatsRow` per kind. */
export const sqlite = statsSql(Now.sqlite)
