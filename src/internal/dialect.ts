/**
 * The storage operations one SQL dialect must provide. `QueueRepo` (its parts
 * in internal/store/) validates input, maps errors and decodes rows; a dialect
 * (internal/pg.ts, internal/sqlite.ts) only encodes parameters and runs the
 * statements of internal/sql/. Every statement is a constant text with
 * positional parameters: no input is ever spliced into SQL.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { Effect } from "effect"
import type { CancelRow, ClaimRow, FencedRow, FencedStateRow, IdRow, ItemRow, KeyRow, StatsRow } from "./rows.js"

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

/** One failure to record. */
export interface FailRow extends Fence {
  readonly error: string
  /** Delay before the retry, or null for final at once (dead, or cancelled when `cancel`). */
  readonly delayMs: number | null
  /** Cancelled (the handler's Cancel outcome) rather than retried or dead. */
  readonly cancel: boolean
}

/** A checked dead-item selection: by ids, or all (of one kind or any) when `ids` is null. */
export interface DeadSelection {
  readonly ids: ReadonlyArray<number> | null
  readonly kind: string | null
}

/** One dialect's statements, bound to a `SqlClient`. */
export interface Dialect {
  readonly name: "pg" | "sqlite"
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
  readonly claim: (
    worker: string,
    limit: number,
    leaseMs: number,
    kinds: ReadonlyArray<string> | null
  ) => Effect.Effect<ReadonlyArray<ClaimRow>, SqlError>
  readonly complete: (fences: ReadonlyArray<Fence>) => Effect.Effect<ReadonlyArray<FencedRow>, SqlError>
  /** outcome: "waiting" | "dead" | "cancelled" | "absorbed". Fails with a unique violation when two rows of a batch share a key. */
  readonly fail: (rows: ReadonlyArray<FailRow>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>
  /** outcome: "waiting" | "absorbed". */
  readonly release: (fences: ReadonlyArray<Fence>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>
  readonly extend: (fences: ReadonlyArray<Fence>, leaseMs: number) => Effect.Effect<ReadonlyArray<FencedRow>, SqlError>
  /**
   * Cancels the waiting and running items of these ids in one transaction,
   * `error` their last error; one row per id that names an item. On
   * PostgreSQL the holders of the running ones are notified at commit.
   */
  readonly cancel: (ids: ReadonlyArray<number>, error: string) => Effect.Effect<ReadonlyArray<CancelRow>, SqlError>
  readonly stats: Effect.Effect<ReadonlyArray<StatsRow>, SqlError>
  readonly get: (id: number) => Effect.Effect<ReadonlyArray<ItemRow>, SqlError>
  readonly listDead: (
    kind: string | null,
    afterId: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<ItemRow>, SqlError>
  readonly retryDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<IdRow>, SqlError>
  readonly deleteDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<IdRow>, SqlError>
  /** Milliseconds from the database's now until a waiting item not yet due becomes due or a lease ends (negative if one has ended), if any. */
  readonly nextDue: Effect.Effect<ReadonlyArray<{ readonly wait_ms: number | string | null }>, SqlError>
  readonly isUniqueViolation: (error: SqlError) => boolean
  /**
   * Runs an enqueue's insert and dedupe look-up as one unit where the dialect
   * needs it (SQLite: one transaction, so the look-up sees what the insert
   * skipped); PostgreSQL runs them as they are and retries a lost race.
   */
  readonly atomic: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}
