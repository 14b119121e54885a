/**
 * Totals (docket_counts, migrations/pg/0012_counts.sql): every item that
 * ever finished in each state, and every retry, by kind, for counters
 * (/metrics' docket_finished_total, docket_retried_total).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Total } from "../../Domain.js"
import { type Run, texts } from "./db.js"
import { num } from "./rows.js"

/**
 * Every item that ever finished in each state, and every retry, by kind: the
 * counts of what left plus what is stored now, in one statement (one
 * snapshot: a prune between two reads would count its items twice or not
 * at all). Reads every finished item (an index-only count on PostgreSQL), so
 * it is for a scrape, not a hot path.
 */
export const pg = `
SELECT kind, what, sum(n) AS n FROM (
  SELECT kind, what, n FROM docket_counts
  UNION ALL
  SELECT kind, state AS what, count(*) AS n FROM docket_items_all
  WHERE state IN ('done', 'dead', 'cancelled') GROUP BY kind, state
  UNION ALL
  SELECT kind, 'retried' AS what, sum(retried) AS n FROM docket_minute_counts GROUP BY kind
) t
GROUP BY kind, what
ORDER BY kind, what`

/** SQLite: the same text. */
export const sqlite = pg

/** A total of what ever finished in a state (`what`: done, dead, cancelled) or was retried (`retried`), for one kind. */
export interface TotalRow {
  readonly kind: string
  readonly what: string
  readonly n: number | string
}

const TOTAL_WHATS: ReadonlySet<string> = new Set(["done", "dead", "cancelled", "retried"])

/** The operation: the totals, by kind then what. */
export type InsightTotals = Effect.Effect<ReadonlyArray<Total>, SqlError>

/** `insightTotals` for a dialect (one text for both). */
export const make = texts(pg, sqlite, (run: Run, text): InsightTotals =>
  Effect.map(
    run<TotalRow>(text, []),
    (rows) =>
      rows.filter((r) => TOTAL_WHATS.has(r.what)).map((r): Total => ({ kind: r.kind, what: r.what as Total["what"], count: num(r.n) }))
  ))
