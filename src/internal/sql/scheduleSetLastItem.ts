/**
 * The recurring schedules (docket_schedules, migration 0008): the item of a
 * schedule's last tick, set in the transaction of its compare-and-set. Every
 * time is the database's clock.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { type Run, texts } from "./db.js"

/** PostgreSQL: $1 name, $2 the last tick's item (in the transaction of its compare-and-set). */
export const pg = `UPDATE docket_schedules SET last_item_id = $2::bigint WHERE name = $1::text`

/** SQLite: ?1 name, ?2 item. */
export const sqlite = `UPDATE docket_schedules SET last_item_id = ?2 WHERE name = ?1`

/** The operation: records `itemId` as the schedule's last item. */
export type ScheduleSetLastItem = (name: string, itemId: number) => Effect.Effect<void, SqlError>

/** `scheduleSetLastItem` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): ScheduleSetLastItem => (name, itemId) =>
  Effect.asVoid(run(text, [name, itemId])))
