/**
 * The recurring schedules (docket_schedules, migration 0008): a declaration's
 * compare-and-set (its ticks' inserts in the same transaction:
 * internal/store/schedules.ts). Every time is the database's clock.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"
import type { ScheduleFields } from "./rows.js"

/**
 * PostgreSQL, a declaration: the compare-and-set on both next_tick ($8) and
 * declared_at ($9) as read, so that of two pools starting after a stop only
 * one enqueues the missed ticks. $1 name, $2 kind, $3 cron, $4 tz, $5
 * payload, $6 missed, $7 the new next tick, $10 the last tick enqueued by it
 * (NULL: keep the stored one).
 */
export const pg = `
UPDATE docket_schedules SET kind = $2::text, cron = $3::text, tz = $4::text, payload = $5::text, missed = $6::text,
  next_tick = $7::bigint, last_tick = coalesce($10::bigint, last_tick), declared_at = ${Now.pg}, updated_at = ${Now.pg}
WHERE name = $1::text AND next_tick = $8::bigint AND declared_at = $9::bigint
RETURNING kind, payload`

/** SQLite: as `pg`, ?1-?10. */
export const sqlite = `
UPDATE docket_schedules SET kind = ?2, cron = ?3, tz = ?4, payload = ?5, missed = ?6,
  next_tick = ?7, last_tick = coalesce(?10, last_tick), declared_at = ${Now.sqlite}, updated_at = ${Now.sqlite}
WHERE name = ?1 AND next_tick = ?8 AND declared_at = ?9
RETURNING kind, payload`

/** The operation: a row (kind, payload) only when next_tick and declared_at were as `expected`; else null. */
export type ScheduleRedeclare = (
  fields: ScheduleFields,
  next: number,
  lastTick: number | null,
  expected: { readonly nextTick: number; readonly declaredAt: number }
) => Effect.Effect<{ readonly kind: string; readonly payload: string } | null, SqlError>

/** `scheduleRedeclare` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): ScheduleRedeclare => (f, next, lastTick, expected) =>
  Effect.map(
    run<{ kind: string; payload: string }>(text, [
      f.name, f.kind, f.cron, f.tz, f.payload, f.missed, next, expected.nextTick, expected.declaredAt, lastTick
    ]),
    (rows) => rows[0] ?? null
  ))
