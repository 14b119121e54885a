/**
 * The live-workers table (docket_workers, migration 0006): the rows of pools
 * long silent removed. Every time is the database's clock (./clock.ts), so
 * hosts with skewed clocks agree on which pool is gone.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"

/** PostgreSQL: $1 milliseconds; removes the pools silent for longer, returns their ids. */
export const pg = `DELETE FROM docket_workers WHERE heartbeat_at < ${Now.pg} - $1::bigint RETURNING id`

/** SQLite: ?1 milliseconds. */
export const sqlite = `DELETE FROM docket_workers WHERE heartbeat_at < ${Now.sqlite} - ?1 RETURNING id`

/** The operation: deletes the rows whose heartbeat is older than `silentMs`; their ids, sorted. */
export type WorkerPrune = (silentMs: number) => Effect.Effect<ReadonlyArray<string>, SqlError>

/** `workerPrune` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): WorkerPrune => (silentMs) =>
  Effect.map(run<{ id: string }>(text, [silentMs]), (rows) => rows.map((r) => r.id).sort()))
