/**
 * The recurring schedules (docket_schedules, migration 0008): adding one (the
 * pool's first declaration of it). Every time is the database's clock.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"
import type { ScheduleFields } from "./rows.js"

/**
 * PostgreSQL: adds a schedule unless one of its name exists (then nothing;
 * the caller reads it again). $1 name, $2 kind, $3 cron, $4 tz, $5 payload,
 * $6 missed, $7 next tick.
 */
export const pg = `
INSERT INTO docket_schedules (name, kind, cron, tz, payload, missed, next_tick, declared_at, created_at, updated_at)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, ${Now.pg}, ${Now.pg}, ${Now.pg})
ON CONFLICT (name) DO NOTHING
RETURNING name`

/** SQLite: as `pg`, ?1-?7. */
export const sqlite = `
INSERT INTO docket_schedules (name, kind, cron, tz, payload, missed, next_tick, declared_at, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ${Now.sqlite}, ${Now.sqlite}, ${Now.sqlite})
ON CONFLICT (name) DO NOTHING
RETURNING name`

/** The operation: adds a schedule unless its name exists; true if added. */
export type ScheduleInsert = (fields: ScheduleFields, nextTick: number) => Effect.Effect<boolean, SqlError>

/** `scheduleInsert` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): ScheduleInsert => (f, nextTick) =>
  Effect.map(run<{ name: string }>(text, [f.name, f.kind, f.cron, f.tz, f.payload, f.missed, nextTick]), (rows) => rows.length > 0))
