/**
 * The read model of a dashboard and of /metrics (internal/store/insights.ts):
 * per kind with due items (waiting and due, or running with an ended lease),
 * how long its oldest due item has been due, on the database's clock. Reads the
 * waiting and the running items (the claim's and the lease's partial indexes),
 * grouped by kind; finished items are not read.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { OldestDue } from "../../Domain.js"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"
import { num } from "./rows.js"

const oldestDue = (now: string) => `
SELECT kind, ${now} - min(due_at) AS age_ms, count(*) AS n FROM (
  SELECT kind, run_at AS due_at FROM docket_items WHERE state = 'waiting' AND run_at <= ${now}
  UNION ALL
  SELECT kind, lease_until AS due_at FROM docket_items WHERE state = 'running' AND lease_until <= ${now}
) due
GROUP BY kind ORDER BY kind`

/** PostgreSQL: per kind, the oldest due item's age (ms) and the due count. */
export const pg = oldestDue(Now.pg)

/** SQLite: as `pg`. */
export const sqlite = oldestDue(Now.sqlite)

/** The operation: per kind with due items, by kind. */
export type InsightOldestDue = Effect.Effect<ReadonlyArray<OldestDue>, SqlError>

/** `insightOldestDue` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): InsightOldestDue =>
  Effect.map(
    run<{ kind: string; age_ms: number | string; n: number | string }>(text, []),
    (rows) => rows.map((r): OldestDue => ({ kind: r.kind, ageMs: Math.max(0, num(r.age_ms)), due: num(r.n) }))
  ))
