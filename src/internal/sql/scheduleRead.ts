/**
 * The recurring schedules (docket_schedules, migration 0008): reading them with
 * the database's now, each with its last item's state. Every time is the
 * database's clock.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"
import { num } from "./rows.js"

/** A schedule read with the database's now; the schedule's columns NULL when none matched. */
export interface ScheduleRow {
  readonly now_ms: number | string
  readonly name: string | null
  readonly kind: string
  readonly cron: string
  readonly tz: string | null
  readonly payload: string
  readonly missed: "skip" | "one" | "all"
  readonly next_tick: number | string
  readonly last_tick: number | string | null
  readonly last_item_id: number | string | null
  readonly declared_at: number | string
  readonly created_at: number | string
  readonly updated_at: number | string
  readonly last_item_state: string | null
}

const COLUMNS = "s.name, s.kind, s.cron, s.tz, s.payload, s.missed, s.next_tick, s.last_tick, s.last_item_id, " +
  "s.declared_at, s.created_at, s.updated_at"

// One row always (the now), joined to the schedules named (all when the
// names are NULL), each with its last item's state (NULL when the item is
// gone): the now and the rows come from one snapshot.
/** PostgreSQL: $1 names (text[]) or NULL for every schedule. */
export const pg = `
SELECT n.now_ms, ${COLUMNS}, i.state AS last_item_state
FROM (SELECT ${Now.pg} AS now_ms) n
LEFT JOIN docket_schedules s ON ($1::text[] IS NULL OR s.name = ANY($1::text[]))
LEFT JOIN docket_items_all i ON i.id = s.last_item_id`

/** SQLite: ?1 names (a JSON array) or NULL. */
export const sqlite = `
SELECT n.now_ms, ${COLUMNS}, i.state AS last_item_state
FROM (SELECT ${Now.sqlite} AS now_ms) n
LEFT JOIN docket_schedules s ON (?1 IS NULL OR s.name IN (SELECT value FROM json_each(?1)))
LEFT JOIN docket_items_all i ON i.id = s.last_item_id`

/** The operation: the schedules named (every one for null) that exist, and the database's now. */
export type ScheduleRead = (
  names: ReadonlyArray<string> | null
) => Effect.Effect<{ readonly now: number; readonly rows: Array<ScheduleRow> }, SqlError>

// The now (always one row), and the schedules that matched.
const decode = (rows: ReadonlyArray<ScheduleRow>) => ({ now: num(rows[0]?.now_ms), rows: rows.filter((r) => r.name !== null) })

/** `scheduleRead` for a dialect (a list of names: a text[] on PostgreSQL, a JSON array on SQLite). */
export const make = op<ScheduleRead>({
  pg: ({ run }) => (names) => Effect.map(run<ScheduleRow>(pg, [names]), decode),
  sqlite: ({ run }) => (names) =>
    Effect.map(run<ScheduleRow>(sqlite, [names === null ? null : JSON.stringify(names)]), decode)
})
