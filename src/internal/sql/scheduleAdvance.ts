/**
 * The recurring schedules (docket_schedules, migration 0008): a tick's
 * compare-and-set, which advances a schedule past its due ticks (the item
 * inserts run in the same transaction: internal/store/schedules.ts). Every time
 * is the database's clock.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"

/**
 * PostgreSQL, a tick: the compare-and-set. Moves next_tick from $2 (what the
 * caller read) to $3 and records $4 as the last tick; no row comes back when
 * next_tick is no longer $2 (another pool took these ticks, or a declaration
 * changed the expression). Returns the row's kind and payload as they are
 * under the row's lock: the items are the current declaration's.
 */
export const pg = `
UPDATE docket_schedules SET next_tick = $3::bigint, last_tick = $4::bigint, declared_at = ${Now.pg}, updated_at = ${Now.pg}
WHERE name = $1::text AND next_tick = $2::bigint
RETURNING kind, payload`

/** SQLite: as `pg`, ?1-?4. */
export const sqlite = `
UPDATE docket_schedules SET next_tick = ?3, last_tick = ?4, declared_at = ${Now.sqlite}, updated_at = ${Now.sqlite}
WHERE name = ?1 AND next_tick = ?2
RETURNING kind, payload`

/** The operation: the schedule's kind and payload, or null when next_tick was no longer `expected`. */
export type ScheduleAdvance = (
  name: string,
  expected: number,
  next: number,
  lastTick: number
) => Effect.Effect<{ readonly kind: string; readonly payload: string } | null, SqlError>

/** `scheduleAdvance` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): ScheduleAdvance => (name, expected, next, lastTick) =>
  Effect.map(run<{ kind: string; payload: string }>(text, [name, expected, next, lastTick]), (rows) => rows[0] ?? null))
