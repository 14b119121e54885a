/**
 * Stats: per kind, how many items are due (waiting and due, or running with
 * an ended lease), scheduled (waiting, not yet due), running (a live lease),
 * done (kept for the retention), dead and cancelled, over docket_items_all
 * (every item: on PostgreSQL done ones are in docket_done). One text for both
 * dialects but for the clock expression.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Counts, Stats } from "../../Domain.js"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"
import { num } from "./rows.js"

/** One kind's counts. */
export interface StatsRow {
  readonly kind: string
  readonly due: number | string | null
  readonly scheduled: number | string | null
  readonly running: number | string | null
  readonly done: number | string | null
  readonly dead: number | string | null
  readonly cancelled: number | string | null
}

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

/** Per-kind counts and their totals. */
export const toStats = (rows: ReadonlyArray<StatsRow>): Stats => {
  const byKind: Record<string, Counts> = {}
  const total = { due: 0, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 0 }
  for (const row of rows) {
    const counts = {
      due: num(row.due),
      scheduled: num(row.scheduled),
      running: num(row.running),
      done: num(row.done),
      dead: num(row.dead),
      cancelled: num(row.cancelled)
    }
    byKind[row.kind] = counts
    total.due += counts.due
    total.scheduled += counts.scheduled
    total.running += counts.running
    total.done += counts.done
    total.dead += counts.dead
    total.cancelled += counts.cancelled
  }
  return { ...total, byKind }
}

/** The operation: the counts of every kind, and their totals. */
export type InsightStats = Effect.Effect<Stats, SqlError>

/** `insightStats` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): InsightStats => Effect.map(run<StatsRow>(text, []), toStats))
