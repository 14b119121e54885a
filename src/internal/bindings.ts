/**
 * Statement groups whose parameters are the same in both dialects, bound
 * once here over a dialect's `run`: the live-workers table and the recurring
 * schedules. Each dialect gives its texts and how it passes a list of names
 * (PostgreSQL a text[], SQLite a JSON array), so internal/pg.ts and
 * internal/sqlite.ts do not each spell the same parameter lists.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { Effect } from "effect"
import type { Dialect } from "./dialect.js"
import type { ScheduleRow, WorkerRow } from "./rows.js"

/** A dialect's statement runner: constant text, positional parameters. */
export type Run = <A extends object>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>

/** The texts of the live-workers statements (internal/sql/workers.ts). */
export interface WorkerTexts {
  readonly heartbeat: string
  readonly remove: string
  readonly prune: string
  readonly list: string
}

type WorkerOps = Pick<Dialect, "heartbeatWorker" | "removeWorker" | "pruneWorkers" | "listWorkers">

/** The live-workers operations over `run`. */
export const workers = (run: Run, texts: WorkerTexts): WorkerOps => ({
  heartbeatWorker: (r) =>
    run<{ started_at: number | string }>(texts.heartbeat, [
      r.id, r.name, r.host, r.pid, r.kinds, r.concurrency, r.running, r.version, r.startedAt
    ]),
  removeWorker: (id) => run<{ id: string }>(texts.remove, [id]),
  pruneWorkers: (silentMs) => run<{ id: string }>(texts.prune, [silentMs]),
  listWorkers: run<WorkerRow>(texts.list, [])
})

/** The texts of the schedule statements (internal/sql/schedules.ts). */
export interface ScheduleTexts {
  readonly read: string
  readonly insert: string
  readonly advance: string
  readonly redeclare: string
  readonly lastItem: string
  readonly touch: string
}

type ScheduleOps = Pick<
  Dialect,
  "readSchedules" | "insertSchedule" | "advanceSchedule" | "redeclareSchedule" | "setScheduleItem" | "touchSchedules"
>

/** The schedule operations over `run`; `names` encodes a list of schedule names as the dialect takes it. */
export const schedules = (run: Run, texts: ScheduleTexts, names: (list: ReadonlyArray<string>) => unknown): ScheduleOps => ({
  readSchedules: (list) => run<ScheduleRow>(texts.read, [list === null ? null : names(list)]),
  insertSchedule: (f, nextTick) =>
    run<{ name: string }>(texts.insert, [f.name, f.kind, f.cron, f.tz, f.payload, f.missed, nextTick]),
  advanceSchedule: (name, expected, next, lastTick) =>
    run<{ kind: string; payload: string }>(texts.advance, [name, expected, next, lastTick]),
  redeclareSchedule: (f, next, lastTick, expected) =>
    run<{ kind: string; payload: string }>(texts.redeclare, [
      f.name, f.kind, f.cron, f.tz, f.payload, f.missed, next, expected.nextTick, expected.declaredAt, lastTick
    ]),
  setScheduleItem: (name, itemId) => run(texts.lastItem, [name, itemId]),
  touchSchedules: (list) => run(texts.touch, [names(list)])
})
