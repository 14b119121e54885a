/**
 * The live-workers table (docket_workers, migration 0006): every pool, with
 * its heartbeat's age and its status from it. Every time is the database's
 * clock (./clock.ts), so hosts with skewed clocks agree on which pool is gone.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { WorkerInfo } from "../../Domain.js"
import * as Now from "./clock.js"
import { WORKER_COLUMNS } from "./columns.js"
import { type Run, texts } from "./db.js"
import { num } from "./rows.js"

/** A worker pool's row, with its heartbeat's age. */
export interface WorkerRow {
  readonly id: string
  readonly name: string
  readonly host: string
  readonly pid: number | string
  /** A JSON array of kinds, or NULL for every kind. */
  readonly kinds: string | null
  readonly concurrency: number | string
  readonly running: number | string
  readonly version: string
  readonly started_at: number | string
  readonly heartbeat_at: number | string
  /** The database's now less heartbeat_at. */
  readonly age_ms: number | string
}

// The age is computed in the statement, on the database's clock: the reader's
// own clock never decides whether a pool is gone.
// (In no order: the store sorts them by code unit, the same on every dialect.)
const listSql = (now: string) => `
SELECT ${WORKER_COLUMNS}, ${now} - heartbeat_at AS age_ms FROM docket_workers`

/** PostgreSQL: every pool, with its heartbeat's age in ms. */
export const pg = listSql(Now.pg)

/** SQLite: as `pg`. */
export const sqlite = listSql(Now.sqlite)

// A row another program wrote with kinds that are not a JSON array of text
// claims no kind that can be named (never "every kind").
const parseKinds = (text: string | null): ReadonlyArray<string> | null => {
  if (text === null) return null
  try {
    const value: unknown = JSON.parse(text)
    if (Array.isArray(value)) return value.filter((k): k is string => typeof k === "string")
  } catch {
    // unreadable: below
  }
  return []
}

/** A stored row as the pool it describes; gone when its heartbeat is older than `goneAfterMs`. */
export const toWorkerInfo = (row: WorkerRow, goneAfterMs: number): WorkerInfo => {
  const age = Math.max(0, num(row.age_ms))
  return {
    id: row.id,
    name: row.name,
    host: row.host,
    pid: num(row.pid),
    kinds: parseKinds(row.kinds),
    concurrency: num(row.concurrency),
    running: num(row.running),
    version: row.version,
    startedAt: num(row.started_at),
    heartbeatAt: num(row.heartbeat_at),
    heartbeatAgeMs: age,
    status: age > goneAfterMs ? "gone" : "live"
  }
}

// In code-unit order, not the database's collation: the same order on every
// dialect and machine (PostgreSQL's locale collations skip punctuation).
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
const byNameThenId = (a: WorkerInfo, b: WorkerInfo) => compare(a.name, b.name) || compare(a.id, b.id)

/** The operation: every pool, by name then id; gone when its heartbeat is older than `goneAfterMs`. */
export type WorkerList = (goneAfterMs: number) => Effect.Effect<ReadonlyArray<WorkerInfo>, SqlError>

/** `workerList` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): WorkerList => (goneAfterMs) =>
  Effect.map(run<WorkerRow>(text, []), (rows) => rows.map((row) => toWorkerInfo(row, goneAfterMs)).sort(byNameThenId)))
