/**
 * Row shapes as the drivers return them, the decoders several operations
 * share (an item row as an `Item`, ids), and the inputs several operations
 * take (a fence, a dead-item selection, a schedule's fields). The pg driver
 * returns bigint columns as strings; SQLite returns numbers.
 */
import type { AttemptError, Item } from "../../Domain.js"

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
  /** Its group inside its kind (migration 0017); NULL for none. */
  readonly group_key: string | null
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

/** A driver's number (a bigint column arrives as a string from pg), null as 0. */
export const num = (value: number | string | null | undefined): number =>
  typeof value === "number" ? value : value === null || value === undefined ? 0 : Number(value)

/** As `num`, keeping null. */
export const numOrNull = (value: number | string | null | undefined): number | null =>
  value === null || value === undefined ? null : num(value)

/** What a change after a claim presents: the item and the claim's token. */
export interface Fence {
  readonly id: number
  readonly token: number
}

/** A checked dead-item selection: by ids, or all (of one kind or any) when `ids` is null. */
export interface DeadSelection {
  readonly ids: ReadonlyArray<number> | null
  readonly kind: string | null
}

/** A schedule's declaration as stored (internal/store/schedules.ts). */
export interface ScheduleFields {
  readonly name: string
  readonly kind: string
  readonly cron: string
  readonly tz: string | null
  readonly payload: string
  readonly missed: "skip" | "one" | "all"
}

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
  group: row.group_key ?? null,
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

/** The items of item rows. */
export const toItems = (rows: ReadonlyArray<ItemRow>): Array<Item> => rows.map(toItem)

/** The ids of the rows, ascending. */
export const toIds = (rows: ReadonlyArray<IdRow>): Array<number> => rows.map((r) => num(r.id)).sort((a, b) => a - b)
