/**
 * The live-workers table (docket_workers, migration 0006): a pool's
 * heartbeat, its registration the first one. Every time is the database's
 * clock (./clock.ts), so hosts with skewed clocks agree on which pool is gone.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { WORKER_COLUMNS } from "./columns.js"
import { type Run, texts } from "./db.js"
import { num } from "./rows.js"

/** One checked heartbeat of a worker pool (internal/store/workers.ts makes it). */
export interface HeartbeatRow {
  readonly id: string
  readonly name: string
  readonly host: string
  readonly pid: number
  /** A JSON array of kinds, or null for every kind. */
  readonly kinds: string | null
  readonly concurrency: number
  readonly running: number
  readonly version: string
  /** An earlier heartbeat's start time, or null to take the database's now if the row is inserted. */
  readonly startedAt: number | null
}

/** The operation: upserts the pool's row; returns its started_at. */
export type WorkerHeartbeat = (row: HeartbeatRow) => Effect.Effect<number, SqlError>

/**
 * PostgreSQL heartbeat: $1 id, $2 name, $3 host, $4 pid, $5 kinds (JSON text
 * or NULL), $6 concurrency, $7 running, $8 version, $9 the start time of an
 * earlier heartbeat or NULL. Inserts the row (the first heartbeat, or the row
 * was removed meanwhile: it comes back with its start time when the pool
 * knows it, else now), or renews its running count and heartbeat time.
 */
export const pg = `
INSERT INTO docket_workers (${WORKER_COLUMNS})
VALUES ($1::text, $2::text, $3::text, $4::integer, $5::text, $6::integer, $7::integer, $8::text,
  coalesce($9::bigint, ${Now.pg}), ${Now.pg})
ON CONFLICT (id) DO UPDATE SET running = EXCLUDED.running, heartbeat_at = EXCLUDED.heartbeat_at
RETURNING started_at`

/** SQLite heartbeat: the parameters of `pg`, numbered ?1-?9. */
export const sqlite = `
INSERT INTO docket_workers (${WORKER_COLUMNS})
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, coalesce(?9, ${Now.sqlite}), ${Now.sqlite})
ON CONFLICT (id) DO UPDATE SET running = excluded.running, heartbeat_at = excluded.heartbeat_at
RETURNING started_at`

/** `workerHeartbeat` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): WorkerHeartbeat => (r) =>
  Effect.map(
    run<{ started_at: number | string }>(text, [
      r.id, r.name, r.host, r.pid, r.kinds, r.concurrency, r.running, r.version, r.startedAt
    ]),
    (rows) => num(rows[0]?.started_at)
  ))
