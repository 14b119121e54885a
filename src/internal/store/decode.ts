/**
 * What the database returns, as Docket's values: rows decoded into claims,
 * items, counts and waits, fenced states into outcomes, and a failed
 * statement into a typed `StorageError`.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Option } from "effect"
import type { AttemptError, Claim, Counts, FailOutcome, Item, ReleaseOutcome, SnoozeOutcome, Stats } from "../../Domain.js"
import { StorageError } from "../../Errors.js"
import { type ClaimRow, type IdRow, type ItemRow, num, numOrNull, type StatsRow } from "../rows.js"

/** Maps a failed statement of `operation` to a `StorageError`. */
export const storage = (operation: string) => (cause: SqlError) => new StorageError({ operation, cause })

/**
 * A claimed row as the claim `worker` holds, with a lease of `leaseMs`. An
 * item enqueued without a budget takes its kind's in `budgets`, else `fallback`.
 */
export const toClaim = (
  row: ClaimRow,
  worker: string,
  budgets: ReadonlyMap<string, number> | undefined,
  fallback: number,
  leaseMs: number
): Claim => ({
  id: num(row.id),
  token: num(row.lease_seq),
  kind: row.kind,
  payloadJson: row.payload,
  key: row.dedupe_key,
  priority: num(row.priority),
  attempt: num(row.attempts),
  maxAttempts: row.max_attempts === null ? budgets?.get(row.kind) ?? fallback : num(row.max_attempts),
  runAt: num(row.run_at),
  createdAt: num(row.created_at),
  leaseUntil: num(row.lease_until),
  // The claim set the lease to its own now plus the lease.
  claimedAt: num(row.lease_until) - leaseMs,
  worker,
  lastError: row.last_error,
  snoozes: num(row.snoozes),
  traceContext: row.trace_context
})

const parsePayload = (json: string): unknown => {
  try {
    return JSON.parse(json)
  } catch {
    return json
  }
}

// The stored errors (jsonb parsed by pg, JSON text from SQLite) as attempt
// errors. A row written by hand that does not parse reads as no history
// rather than failing the read of the item.
const toErrors = (stored: unknown): ReadonlyArray<AttemptError> => {
  let list: unknown = stored
  if (typeof stored === "string") {
    try {
      list = JSON.parse(stored)
    } catch {
      return []
    }
  }
  if (!Array.isArray(list)) return []
  return list.flatMap((e): Array<AttemptError> =>
    typeof e === "object" && e !== null && typeof e.error === "string"
      ? [{ attempt: num(e.attempt), at: num(e.at), worker: typeof e.worker === "string" ? e.worker : null, error: e.error }]
      : []
  )
}

/** Decodes a stored row for people and tools. */
export const toItem = (row: ItemRow): Item => ({
  id: num(row.id),
  kind: row.kind,
  payload: parsePayload(row.payload),
  key: row.dedupe_key,
  priority: num(row.priority),
  state: row.state,
  runAt: num(row.run_at),
  attempts: num(row.attempts),
  maxAttempts: numOrNull(row.max_attempts),
  lastError: row.last_error,
  claimedBy: row.claimed_by,
  leaseUntil: numOrNull(row.lease_until),
  createdAt: num(row.created_at),
  updatedAt: num(row.updated_at),
  traceContext: row.trace_context,
  snoozes: num(row.snoozes),
  finishedAt: numOrNull(row.finished_at),
  result: row.result === null ? null : parsePayload(row.result),
  errors: toErrors(row.errors)
})

/** Claim order: highest priority first, then run-after, then id. */
export const claimOrder = (a: Claim, b: Claim) => b.priority - a.priority || a.runAt - b.runAt || a.id - b.id

/** A failure's outcome from the state its fenced row went to (undefined: no row, the claim was stale). */
export const toFailOutcome = (state: string | undefined): FailOutcome => {
  switch (state) {
    case undefined:
      return "stale"
    case "waiting":
      return "retried"
    case "dead":
    case "cancelled":
      return state
    default:
      return "absorbed"
  }
}

/** A release's outcome from the state its fenced row went to (undefined: no row, the claim was stale). */
export const toReleaseOutcome = (state: string | undefined): ReleaseOutcome =>
  state === undefined ? "stale" : state === "waiting" ? "released" : "absorbed"

/** A snooze's outcome from the state its fenced row went to (undefined: no row, the claim was stale). */
export const toSnoozeOutcome = (state: string | undefined): SnoozeOutcome =>
  state === undefined ? "stale" : state === "waiting" ? "snoozed" : "absorbed"

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

/** The next-due wait (sql/nextDue.ts): none when nothing is scheduled or leased, never negative. */
export const toWait = (rows: ReadonlyArray<{ readonly wait_ms: number | string | null }>): Option.Option<Duration.Duration> => {
  const wait = rows[0]?.wait_ms
  if (wait === null || wait === undefined) return Option.none()
  const ms = num(wait)
  return ms > 1e14 ? Option.none() : Option.some(Duration.millis(Math.max(0, ms)))
}

/** The ids of the rows, ascending. */
export const toIds = (rows: ReadonlyArray<IdRow>): Array<number> => rows.map((r) => num(r.id)).sort((a, b) => a - b)
