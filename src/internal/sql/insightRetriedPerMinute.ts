/**
 * The read model of a dashboard and of /metrics (internal/store/insights.ts):
 * failed attempts sent back to waiting in each minute of a window, by kind.
 * Reads a range of docket_minute_counts' key (minute, kind): at most one row
 * per kind and minute of the window (migration 0009).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { RetriedMinute } from "../../Domain.js"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"
import { num } from "./rows.js"

// The minute as finishedPerMinute gives it (its start, epoch ms); the table keeps epoch minutes.
const retriedPerMinute = (now: string, windowMs: string) => `
SELECT kind, minute * 60000 AS minute, retried AS n
FROM docket_minute_counts
WHERE minute >= (${now} - ${windowMs}) / 60000 AND retried > 0
ORDER BY minute, kind`

/** PostgreSQL: $1 the window in ms: retried attempts per (kind, minute). */
export const pg = retriedPerMinute(Now.pg, "$1::bigint")

/** SQLite: ?1 the window in ms. */
export const sqlite = retriedPerMinute(Now.sqlite, "?1")

/** The operation: the counts of the last `windowMs`, oldest minute first. */
export type InsightRetriedPerMinute = (windowMs: number) => Effect.Effect<ReadonlyArray<RetriedMinute>, SqlError>

/** `insightRetriedPerMinute` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): InsightRetriedPerMinute => (windowMs) =>
  Effect.map(
    run<{ kind: string; minute: number | string; n: number | string }>(text, [windowMs]),
    (rows) => rows.map((r): RetriedMinute => ({ minute: num(r.minute), kind: r.kind, count: num(r.n) }))
  ))
