/**
 * The recurring schedules (docket_schedules, migration 0008): the touch that
 * keeps a declared schedule live (a pool's declarations, every 5 s). Every time
 * is the database's clock.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"

/** PostgreSQL: $1 names (text[]): a declaring pool is alive (every 5 s). */
export const pg = `UPDATE docket_schedules SET declared_at = ${Now.pg} WHERE name = ANY($1::text[])`

/** SQLite: ?1 names (a JSON array). */
export const sqlite = `UPDATE docket_schedules SET declared_at = ${Now.sqlite} WHERE name IN (SELECT value FROM json_each(?1))`

/** The operation: marks the schedules as declared by a live pool now. */
export type ScheduleTouch = (names: ReadonlyArray<string>) => Effect.Effect<void, SqlError>

/** `scheduleTouch` for a dialect (the names: a text[] on PostgreSQL, a JSON array on SQLite). */
export const make = op<ScheduleTouch>({
  pg: ({ run }) => (names) => Effect.asVoid(run(pg, [names])),
  sqlite: ({ run }) => (names) => Effect.asVoid(run(sqlite, [JSON.stringify(names)]))
})
