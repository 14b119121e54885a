/**
 * Prune the retry counts: deletes the rows of docket_minute_counts older than
 * the window they are kept for; each deleted row's retries are added to its
 * kind's count of what left (docket_counts, ./counts.ts), so the retried
 * counter never falls.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { pgAdd, sqliteCounting } from "./counts.js"
import { op } from "./db.js"
import { pgDeleteLocked } from "./historyPrune.js"

/** The operation: deletes at most `limit` retry counts of minutes older than `keptMs`; how many. */
export type HistoryPruneMinuteCounts = (keptMs: number, limit: number) => Effect.Effect<number, SqlError>

/**
 * The retry counts per minute (docket_minute_counts, migration 0009) older
 * than the window they are kept for, the oldest minutes first, at most a
 * batch per statement (its primary key walked from the oldest minute).
 * PostgreSQL: $1 the window in ms, $2 the batch size; one row with the count
 * deleted. SKIP LOCKED: a row a fail is counting into (the current minute,
 * never this old) or another pruner holds is left for the next pass.
 */
export const pg = `
WITH gone AS (${
  pgDeleteLocked(
    "docket_minute_counts",
    `x.minute < (${Now.pg} - $1::bigint) / 60000`,
    "x.minute, x.kind",
    "$2",
    "d.kind, d.retried AS n"
  )
}
), ${pgAdd("counted", "gone", "'retried'")}
SELECT count(*) AS n FROM gone`

/** SQLite: ?1 the window in ms, ?2 the batch size; a row (kind, retried) per count deleted. */
export const sqlite = `
DELETE FROM docket_minute_counts
WHERE (minute, kind) IN (
  SELECT c.minute, c.kind FROM docket_minute_counts c
  WHERE c.minute < (${Now.sqlite} - ?1) / 60000
  ORDER BY c.minute, c.kind
  LIMIT ?2)
RETURNING kind, retried`

/** `historyPruneMinuteCounts` for a dialect. */
export const make = op<HistoryPruneMinuteCounts>({
  pg: ({ run }) => (keptMs, limit) =>
    run<{ n: number | string }>(pg, [keptMs, limit]).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))),
  sqlite: (db) => (keptMs, limit) =>
    sqliteCounting(
      db,
      db.run<{ kind: string; retried: number }>(sqlite, [keptMs, limit]),
      "retried",
      (r) => Number(r.retried)
    ).pipe(Effect.map((rows) => rows.length))
})
