/**
 * The read model of a dashboard and of /metrics (internal/store/insights.ts):
 * items finished (done, dead, cancelled) in each minute of a window, by kind
 * and state. Reads a range of docket_items_finished (state, finished_at, id)
 * per finished state, and on PostgreSQL of docket_done_finished (finished_at,
 * id): only the items finished in the window.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { FinishedMinute, FinishedState } from "../../Domain.js"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"
import { num } from "./rows.js"

// The minute is the finish time rounded down to a whole minute (epoch ms).
const finishedPerMinute = (now: string, windowMs: string) => `
SELECT kind, state, (finished_at / 60000) * 60000 AS minute, count(*) AS n
FROM docket_items_all
WHERE state IN ('done', 'dead', 'cancelled') AND finished_at IS NOT NULL AND finished_at >= ${now} - ${windowMs}
GROUP BY kind, state, (finished_at / 60000) * 60000
ORDER BY minute, kind, state`

/** PostgreSQL: $1 the window in ms: finished items per (kind, state, minute). */
export const pg = finishedPerMinute(Now.pg, "$1::bigint")

/** SQLite: ?1 the window in ms. */
export const sqlite = finishedPerMinute(Now.sqlite, "?1")

/** The operation: the counts of the last `windowMs`, oldest minute first. */
export type InsightFinishedPerMinute = (windowMs: number) => Effect.Effect<ReadonlyArray<FinishedMinute>, SqlError>

/** `insightFinishedPerMinute` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): InsightFinishedPerMinute => (windowMs) =>
  Effect.map(
    run<{ kind: string; state: FinishedState; minute: number | string; n: number | string }>(text, [windowMs]),
    (rows) => rows.map((r): FinishedMinute => ({ minute: num(r.minute), kind: r.kind, state: r.state, count: num(r.n) }))
  ))
