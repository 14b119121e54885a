/**
 * Row shapes as the drivers return them (internal/store/decode.ts maps them to
 * Docket's types). The pg driver returns bigint columns as strings; SQLite
 * returns numbers.
 */

/** Every column of an item (sql/columns.ts, ITEM_COLUMNS). */
export interface ItemRow {
  readonly id: number | string
  readonly kind: string
  readonly payload: string
  readonly dedupe_key: string | null
  readonly priority: number | string
  readonly state: "waiting" | "running" | "done" | "dead" | "cancelled"
  readonly run_at: number | string
  readonly attempts: number | string
  /** NULL when the enqueue gave none (sql/columns.ts). */
  readonly max_attempts: number | string | null
  readonly last_error: string | null
  readonly claimed_by: string | null
  readonly lease_until: number | string | null
  readonly lease_seq: number | string
  readonly created_at: number | string
  readonly updated_at: number | string
  /** The enqueuer's W3C traceparent, as stored (unchecked). */
  readonly trace_context: string | null
  /** How many times its handler snoozed it (migration 0006). */
  readonly snoozes: number | string
  /** When it finished (migration 0007); NULL while it can run. */
  readonly finished_at: number | string | null
  /** The handler's result, JSON text; NULL for none. */
  readonly result: string | null
  /** The attempts' errors: pg returns jsonb parsed, SQLite the JSON text. */
  readonly errors: unknown
}

/** What a claim returns: the item's columns a run needs (state, claimer and update time are known). */
export type ClaimRow = Omit<ItemRow, "state" | "claimed_by" | "updated_at">

/** What an insert or a dedupe look-up returns: an item's id, kind and key. */
export interface KeyRow {
  readonly id: number | string
  readonly kind: string
  readonly dedupe_key: string | null
}

/** An item's id (what the dead-item tools return). */
export interface IdRow {
  readonly id: number | string
}

/**
 * A total of what ever finished in a state (`what`: done, dead, cancelled)
 * or was retried (`retried`), for one kind (sql/counts.ts).
 */
export interface TotalRow {
  readonly kind: string
  readonly what: string
  readonly n: number | string
}

/** A row a fenced change applied to: its id and the claim token it matched. */
export interface FencedRow {
  readonly id: number | string
  readonly lease_seq: number | string
}

/**
 * A row a fenced change of state applied to, and the state it went to
 * (fail: "waiting", "dead", "cancelled" or "absorbed"; release and snooze:
 * "waiting" or "absorbed").
 */
export interface FencedStateRow extends FencedRow {
  readonly outcome: string
}

/** What a cancel did to an item that exists (sql/cancel.ts): "cancelled", "cancelledRunning" or "finished". */
export interface CancelRow {
  readonly id: number | string
  readonly outcome: string
}

/** One kind's counts (sql/stats.ts). */
export interface StatsRow {
  readonly kind: string
  readonly due: number | string | null
  readonly scheduled: number | string | null
  readonly running: number | string | null
  readonly done: number | string | null
  readonly dead: number | string | null
  readonly cancelled: number | string | null
}

/** One kind's controls and counts (sql/kinds.ts). SQLite's booleans are 0 and 1. */
export interface KindRow {
  readonly kind: string
  readonly paused: boolean | number
  readonly concurrency: number | string | null
  readonly rate_limit: number | string | null
  readonly rate_period_ms: number | string | null
  readonly limits_set_by: string
  readonly waiting: number | string | null
  readonly scheduled: number | string | null
  readonly running: number | string | null
  readonly expired: number | string | null
  readonly done: number | string | null
  readonly dead: number | string | null
  readonly cancelled: number | string | null
}

/** A worker pool's row of the live-workers table (sql/workers.ts), with its heartbeat's age. */
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

/** A driver's number (a bigint column arrives as a string from pg), null as 0. */
export const num = (value: number | string | null | undefined): number =>
  typeof value === "number" ? value : value === null || value === undefined ? 0 : Number(value)

/** As `num`, keeping null. */
export const numOrNull = (value: number | string | null | undefined): number | null =>
  value === null || value === undefined ? null : num(value)

/** A schedule read with the database's now (sql/schedules.ts); the schedule's columns NULL when none matched. */
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
