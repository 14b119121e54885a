/**
 * The storage operations one SQL dialect must provide. `QueueRepo` (its parts
 * in internal/store/) validates input, maps errors and decodes rows; a dialect
 * (internal/pg.ts, internal/sqlite.ts) only encodes parameters and runs the
 * statements of internal/sql/. Every statement is a constant text with
 * positional parameters: no input is ever spliced into SQL.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { Effect } from "effect"
import type {
  CancelRow, ClaimRow, FencedRow, FencedStateRow, IdRow, ItemRow, KeyRow, KindRow, ScheduleRow, StatsRow, TotalRow, WorkerRow
} from "./rows.js"

/** One checked, encoded enqueue request (internal/store/prepare.ts makes it). */
export interface InsertRow {
  readonly kind: string
  readonly payload: string
  readonly key: string | null
  readonly priority: number
  /** Absolute due time, or null to use the database's now plus `delayMs`. */
  readonly runAt: number | null
  readonly delayMs: number
  /** Null when the request gave none (its claimer decides). */
  readonly maxAttempts: number | null
}

/** What a change after a claim presents: the item and the claim's token. */
export interface Fence {
  readonly id: number
  readonly token: number
}

/** One completion to record: its result as JSON text, or null for none. */
export interface CompleteRow extends Fence {
  readonly result: string | null
}

/**
 * One checked page request of `list` (internal/store/history.ts makes it):
 * a finished state by (finished_at, id) below the cursor's key, or the
 * others by id below the cursor's id. TOP_KEY (sql/list.ts) for a first page.
 */
export type ListQuery =
  | {
    readonly by: "finished"
    readonly state: "done" | "dead" | "cancelled"
    readonly kind: string | null
    readonly finishedBefore: number
    readonly idBefore: number
    readonly limit: number
  }
  | {
    readonly by: "all" | "waiting" | "scheduled" | "running"
    readonly kind: string | null
    readonly idBefore: number
    readonly limit: number
  }

/** One failure to record. */
export interface FailRow extends Fence {
  readonly error: string
  /** Delay before the retry, or null for final at once (dead, or cancelled when `cancel`). */
  readonly delayMs: number | null
  /** Cancelled (the handler's Cancel outcome) rather than retried or dead. */
  readonly cancel: boolean
}

/** One snooze to record. */
export interface SnoozeRow extends Fence {
  /** Checked: from 0 to MAX_DELAY_MS (internal/validate.ts). */
  readonly delayMs: number
}

/** A checked dead-item selection: by ids, or all (of one kind or any) when `ids` is null. */
export interface DeadSelection {
  readonly ids: ReadonlyArray<number> | null
  readonly kind: string | null
}

/** A kind's limits as stored (NULL for none; the rate's two together). */
export interface LimitsRow {
  readonly concurrency: number | null
  readonly rateLimit: number | null
  readonly ratePeriodMs: number | null
  /** A person's setting only: leave the concurrency, or the rate, as stored. */
  readonly keepConcurrency?: boolean | undefined
  readonly keepRate?: boolean | undefined
}

/** One checked heartbeat of a worker pool (internal/store/workers.ts makes it). */
export interface HeartbeatRow {
  readonly id: string
  readonly name: string
  readonly host: string
  readonly pid: number
  /** A JSON array of kinds, or null for every kind. */
  readonly kinds: string | null
  readonly concurrency: number
  readonly running: number
  readonly version: string
  /** An earlier heartbeat's start time, or null to take the database's now if the row is inserted. */
  readonly startedAt: number | null
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

/** One dialect's statements, bound to a `SqlClient`. */
export interface Dialect {
  readonly name: "pg" | "sqlite"
  /**
   * Runs one of internal/sql's constant texts of this dialect (its `pg` or
   * `sqlite` text, chosen by `name`) with positional parameters: for the
   * statement groups bound in their store part (internal/store/insights.ts),
   * whose parameters are the same in both dialects.
   */
  readonly run: <A extends object>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /**
   * Inserts rows in order, skipping those whose key a waiting item holds;
   * returns inserted rows in id order. `traceContext`: the enqueuer's W3C
   * traceparent, stored with every row (null outside a trace).
   */
  readonly insert: (
    rows: ReadonlyArray<InsertRow>,
    traceContext: string | null
  ) => Effect.Effect<ReadonlyArray<KeyRow>, SqlError>
  /** The waiting items holding these (kind, key) pairs. */
  readonly findWaiting: (
    pairs: ReadonlyArray<readonly [string, string]>
  ) => Effect.Effect<ReadonlyArray<KeyRow>, SqlError>
  /** Leases due items; at most `limitedMax` of them of limited kinds, none of paused kinds. */
  readonly claim: (
    worker: string,
    limit: number,
    leaseMs: number,
    kinds: ReadonlyArray<string> | null,
    limitedMax: number
  ) => Effect.Effect<ReadonlyArray<ClaimRow>, SqlError>
  /**
   * Done: `keep` (a retention of done items above 0) keeps each row as
   * 'done' with its result and finish time; else deletes it.
   */
  readonly complete: (rows: ReadonlyArray<CompleteRow>, keep: boolean) => Effect.Effect<ReadonlyArray<FencedRow>, SqlError>
  /** outcome: "waiting" | "dead" | "cancelled" | "absorbed". Fails with a unique violation when two rows of a batch share a key. */
  readonly fail: (rows: ReadonlyArray<FailRow>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>
  /** outcome: "waiting" | "absorbed". */
  readonly release: (fences: ReadonlyArray<Fence>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>
  /** outcome: "waiting" | "absorbed". Fails with a unique violation when two rows of a batch share a key. */
  readonly snooze: (rows: ReadonlyArray<SnoozeRow>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>
  readonly extend: (fences: ReadonlyArray<Fence>, leaseMs: number) => Effect.Effect<ReadonlyArray<FencedRow>, SqlError>
  /**
   * Cancels the waiting and running items of these ids in one transaction,
   * `error` their last error; one row per id that names an item. On
   * PostgreSQL the holders of the running ones are notified at commit.
   */
  readonly cancel: (ids: ReadonlyArray<number>, error: string) => Effect.Effect<ReadonlyArray<CancelRow>, SqlError>
  readonly stats: Effect.Effect<ReadonlyArray<StatsRow>, SqlError>
  readonly get: (id: number) => Effect.Effect<ReadonlyArray<ItemRow>, SqlError>
  /** The items among these ids, in id order. */
  readonly getMany: (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<ItemRow>, SqlError>
  readonly listDead: (
    kind: string | null,
    afterId: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<ItemRow>, SqlError>
  readonly retryDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<IdRow>, SqlError>
  /** A page of items, newest first (sql/list.ts). */
  readonly list: (query: ListQuery) => Effect.Effect<ReadonlyArray<ItemRow>, SqlError>
  /** Deletes at most `limit` items of `state` finished at least `retentionMs` ago, oldest first; how many. */
  readonly prune: (state: "done" | "dead" | "cancelled", retentionMs: number, limit: number) => Effect.Effect<number, SqlError>
  /** Deletes at most `limit` retry counts of minutes older than `keptMs` (sql/prune.ts); how many. */
  readonly pruneMinuteCounts: (keptMs: number, limit: number) => Effect.Effect<number, SqlError>
  readonly deleteDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<IdRow>, SqlError>
  /** Every item that ever finished in a state, and every retry, by kind: what left plus what is stored (sql/counts.ts). */
  readonly totals: Effect.Effect<ReadonlyArray<TotalRow>, SqlError>
  /** Milliseconds from the database's now until a waiting item not yet due becomes due or a lease ends (negative if one has ended), if any. */
  readonly nextDue: Effect.Effect<ReadonlyArray<{ readonly wait_ms: number | string | null }>, SqlError>
  /** Every kind with items or a control row, with its controls and counts. */
  readonly listKinds: Effect.Effect<ReadonlyArray<KindRow>, SqlError>
  /** Pauses or resumes a kind (its row made if needed). */
  readonly setPaused: (kind: string, paused: boolean) => Effect.Effect<ReadonlyArray<{ readonly kind: string }>, SqlError>
  /**
   * Sets a kind's limits and its rate slots, in one transaction: "person" a
   * person's; "code" a handler's declaration (nothing changes where a person
   * set them); "reset" none, handed back to the code. True when it changed.
   */
  readonly setLimits: (kind: string, limits: LimitsRow, by: "person" | "code" | "reset") => Effect.Effect<boolean, SqlError>
  /** Upserts a pool's row in docket_workers; returns its started_at. */
  readonly heartbeatWorker: (row: HeartbeatRow) => Effect.Effect<ReadonlyArray<{ readonly started_at: number | string }>, SqlError>
  /** Deletes a pool's row; returns its id if it was there. */
  readonly removeWorker: (id: string) => Effect.Effect<ReadonlyArray<{ readonly id: string }>, SqlError>
  /** Deletes the rows whose heartbeat is older than `silentMs`; returns their ids. */
  readonly pruneWorkers: (silentMs: number) => Effect.Effect<ReadonlyArray<{ readonly id: string }>, SqlError>
  readonly listWorkers: Effect.Effect<ReadonlyArray<WorkerRow>, SqlError>
  /** The schedules named (every one for null), with the database's now; always at least one row. */
  readonly readSchedules: (names: ReadonlyArray<string> | null) => Effect.Effect<ReadonlyArray<ScheduleRow>, SqlError>
  /** Adds a schedule unless its name exists; returns its name if added. */
  readonly insertSchedule: (fields: ScheduleFields, nextTick: number) => Effect.Effect<ReadonlyArray<{ readonly name: string }>, SqlError>
  /** A tick's compare-and-set (sql/schedules.ts): a row (kind, payload) only when next_tick was `expected`. */
  readonly advanceSchedule: (
    name: string,
    expected: number,
    next: number,
    lastTick: number
  ) => Effect.Effect<ReadonlyArray<{ readonly kind: string; readonly payload: string }>, SqlError>
  /** A declaration's compare-and-set, on next_tick and declared_at as read. */
  readonly redeclareSchedule: (
    fields: ScheduleFields,
    next: number,
    lastTick: number | null,
    expected: { readonly nextTick: number; readonly declaredAt: number }
  ) => Effect.Effect<ReadonlyArray<{ readonly kind: string; readonly payload: string }>, SqlError>
  readonly setScheduleItem: (name: string, itemId: number) => Effect.Effect<unknown, SqlError>
  readonly touchSchedules: (names: ReadonlyArray<string>) => Effect.Effect<unknown, SqlError>
  /** Runs `effect` in one transaction (joining the caller's, if any). */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  readonly isUniqueViolation: (error: SqlError) => boolean
  /**
   * Runs an enqueue's insert and dedupe look-up as one unit where the dialect
   * needs it (SQLite: one transaction, so the look-up sees what the insert
   * skipped); PostgreSQL runs them as they are and retries a lost race.
   */
  readonly atomic: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}
