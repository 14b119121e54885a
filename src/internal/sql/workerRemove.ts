/**
 * The live-workers table (docket_workers, migration 0006): a pool's row
 * removed at its graceful stop.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { type Run, texts } from "./db.js"

/** PostgreSQL: $1 the pool's id; returns its id if it was there. */
export const pg = `DELETE FROM docket_workers WHERE id = $1 RETURNING id`

/** SQLite: ?1 the pool's id. */
export const sqlite = `DELETE FROM docket_workers WHERE id = ?1 RETURNING id`

/** The operation: deletes a pool's row; false when there was none. */
export type WorkerRemove = (id: string) => Effect.Effect<boolean, SqlError>

/** `workerRemove` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): WorkerRemove => (id) =>
  Effect.map(run<{ id: string }>(text, [id]), (rows) => rows.length > 0))
