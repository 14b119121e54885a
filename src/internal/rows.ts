/**
 * Row shapes as the drivers return them, and their mapping to Docket's types.
 * The pg driver returns bigint columns as strings; SQLite returns numbers.
 */
export interface ItemRow {
  readonly id: number | string
  readonly kind: string
  readonly payload: string
  readonly dedupe_key: string | null
  readonly priority: number | string
  readonly state: "waiting" | "running" | "dead"
  readonly run_at: number | string
  readonly attempts: number | string
  readonly max_attempts: number | string
  readonly last_error: string | null
  readonly claimed_by: string | null
  readonly lease_until: number | string | null
  readonly lease_seq: number | string
  readonly created_at: number | string
  readonly updated_at: number | string
}

/** What a claim returns: the item's columns a run needs (state, claimer and update time are known). */
export type ClaimRow = Omit<ItemRow, "state" | "claimed_by" | "updated_at">

export interface KeyRow {
  readonly id: number | string
  readonly kind: string
  readonly dedupe_key: string | null
}

export interface IdRow {
  readonly id: number | string
}

/** A row a fenced change applied to: its id and the claim token it matched. */
export interface FencedRow {
  readonly id: number | string
  readonly lease_seq: number | string
}

export interface OutcomeRow extends FencedRow {
  readonly outcome: string
}

export interface StatsRow {
  readonly kind: string
  readonly due: number | string | null
  readonly scheduled: number | string | null
  readonly running: number | string | null
  readonly dead: number | string | null
}

export const num = (value: number | string | null | undefined): number =>
  typeof value === "number" ? value : value === null || value === undefined ? 0 : Number(value)

export const numOrNull = (value: number | string | null | undefined): number | null =>
  value === null || value === undefined ? null : num(value)

/** ITEM_COLUMNS is the column list every item-returning statement selects, in both dialects. */
export const ITEM_COLUMNS =
  "id, kind, payload, dedupe_key, priority, state, run_at, attempts, max_attempts, last_error, claimed_by, lease_until, lease_seq, created_at, updated_at"

/** The columns of ClaimRow, in both dialects. */
export const CLAIM_COLUMNS =
  "id, kind, payload, dedupe_key, priority, run_at, attempts, max_attempts, last_error, lease_until, lease_seq, created_at"
