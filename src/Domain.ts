/**
 * Docket's domain types: items and claims, what an operation did, counts.
 * Every module uses them from here; `QueueRepo` re-exports them for users.
 */
import type * as Duration from "effect/Duration"
import type { Item, ListState } from "./Item.js"

/** Options of one enqueue. `delay` and `runAt` are exclusive. */
export interface EnqueueOptions {
  /**
   * Dedupe key: while an item of this kind and key WAITS, a second enqueue of
   * it does what `onConflict` says (by default nothing: the first is kept).
   */
  readonly key?: string | undefined
  /**
   * What an enqueue with a `key` does when an item of its kind and key
   * already waits (see `OnConflict`); default: the kind's handler's
   * `onConflict` when enqueued through `Docket.client`, else "keep". Ignored
   * without a key.
   */
  readonly onConflict?: OnConflict | undefined
  /** Due this long after now (database clock); a `Duration` input or milliseconds. */
  readonly delay?: Duration.DurationInput | undefined
  /** Due at this time (a `Date` or epoch milliseconds). */
  readonly runAt?: Date | number | undefined
  /** Higher runs first among due items; default 0. */
  readonly priority?: number | undefined
  /**
   * Attempts before the item is dead. When not given, the worker that runs it
   * decides: its handler's `maxAttempts`, else the queue's default (8). So a
   * handler's budget applies to every item of its kind enqueued without one,
   * whoever enqueued it, and a change of the handler's budget applies to the
   * items already waiting.
   */
  readonly maxAttempts?: number | undefined
  /**
   * The item's group inside its kind (a customer, an endpoint, a repository):
   * with the kind's `perGroup` limits (a handler option), at most that many
   * items of one group run at once, in enqueue order when `ordered`. Without
   * `perGroup` it is a label only. 1 to 512 characters; independent of `key`
   * and of `priority`.
   */
  readonly group?: string | undefined
}

/** One item of an `enqueueMany` batch. */
export interface EnqueueRequest extends EnqueueOptions {
  readonly kind: string
  readonly payload: unknown
}

/**
 * What a second enqueue of a held dedupe key does (docs/concepts.md "Dedupe keys"):
 * - "keep": nothing; the waiting item stays as it is (`Deduplicated`).
 * - "replace": the waiting item takes this enqueue's payload, due time, group
 *   and trace, and its priority and max attempts when given; its attempts
 *   start again from 0. It keeps its id, so its place in an ordered group.
 * - "debounce": as "replace", but the due time only moves later (the later of
 *   the waiting item's and this enqueue's: now plus `delay`, or `runAt`), so a
 *   burst of enqueues with a delay runs once, that long after the last.
 * - "replaceRunning": as "replace", and any RUNNING item of the kind and key is
 *   cancelled as `cancel` does (its run interrupted, its holder's writes
 *   refused as stale); the new payload waits (or is inserted) to run.
 */
export type OnConflict = "keep" | "replace" | "debounce" | "replaceRunning"

/**
 * What an enqueue did: added a new item (`Enqueued`), found a waiting item with
 * the same kind and key and left it (`Deduplicated`, "keep"), or changed that
 * item (`Replaced`, the other modes). An enqueue with "replaceRunning" and a
 * key also says which running items of its kind and key it cancelled
 * (`cancelled`, ids, empty when none ran).
 */
export type EnqueueResult =
  | { readonly _tag: "Enqueued"; readonly id: number; readonly cancelled?: ReadonlyArray<number> }
  | { readonly _tag: "Deduplicated"; readonly id: number }
  | { readonly _tag: "Replaced"; readonly id: number; readonly cancelled?: ReadonlyArray<number> }

/** A claimed item: the handle for complete, fail, release, snooze and extend. */
export interface Claim {
  readonly id: number
  /** The claim token: fresh for every claim of the item. */
  readonly token: number
  readonly kind: string
  /** The payload as stored (JSON text). */
  readonly payloadJson: string
  readonly key: string | null
  /** The item's group inside its kind, or null. */
  readonly group: string | null
  readonly priority: number
  /** This attempt's number, from 1. */
  readonly attempt: number
  /**
   * The item's budget: the one its enqueue gave, else the claim's
   * `maxAttemptsByKind` for its kind (a worker pool's: its handler's
   * `maxAttempts`), else the service's `defaultMaxAttempts` (8). At this
   * attempt and beyond a failure is dead.
   */
  readonly maxAttempts: number
  readonly runAt: number
  readonly createdAt: number
  /** The lease's end on the database's clock (epoch ms). */
  readonly leaseUntil: number
  /**
   * When this claim took the item, on the database's clock (epoch ms): the
   * start a global rate limit counts.
   */
  readonly claimedAt: number
  readonly worker: string
  /** The previous attempt's error, if any. */
  readonly lastError: string | null
  /** How many times its handler snoozed it so far (snoozes are not attempts). */
  readonly snoozes: number
  /**
   * The enqueuer's span context as a W3C traceparent, when the item was
   * enqueued under an application's tracer (as stored: a worker pool links its
   * run's span to it only if it is well formed).
   */
  readonly traceContext?: string | null | undefined
}

/**
 * A completion with the handler's result: a JSON value (stored as JSON text,
 * at most the queue's `maxResultBytes`). `undefined` stores none.
 */
export interface Completion {
  readonly claim: Claim
  readonly result?: unknown
}

/**
 * What to do with a failed item: retry after a delay (if attempts remain),
 * dead at once, or cancelled (final, like dead, but the work is no longer
 * wanted rather than broken: the handler's `Cancel` outcome).
 */
export type FailNext =
  | { readonly _tag: "Retry"; readonly delay: Duration.DurationInput }
  | { readonly _tag: "Dead" }
  | { readonly _tag: "Cancel" }

/**
 * What a fail did: "retried" (waiting again), "dead", "cancelled", "absorbed" (a
 * waiting twin with the same key stands for it, so it was removed) or "stale"
 * (the claim was no longer held: nothing changed).
 */
export type FailOutcome = "retried" | "dead" | "cancelled" | "absorbed" | "stale"

/** What a release did: "released" (waiting, attempt not counted), "absorbed" or "stale". */
export type ReleaseOutcome = "released" | "absorbed" | "stale"

/**
 * What a snooze did: "snoozed" (waiting until its delay passed, attempt not
 * counted, one more snooze), "absorbed" (a waiting twin with its key stands
 * for it, so it was removed) or "stale" (the claim was no longer held:
 * nothing changed).
 */
export type SnoozeOutcome = "snoozed" | "absorbed" | "stale"

/** One snooze of a `snoozeMany` batch: the claim, and how long until the item is due again. */
export interface SnoozeRequest {
  readonly claim: Claim
  /** A `Duration` input or milliseconds, from 0 to about 100 years. */
  readonly delay: Duration.DurationInput
}

/** Counts of items by visible state. Due includes items whose lease ran out. */
export interface Counts {
  readonly due: number
  readonly scheduled: number
  readonly running: number
  /** Done and kept (retained for `retention.done`, then pruned). */
  readonly done: number
  readonly dead: number
  readonly cancelled: number
}

/** Counts in total and by kind. */
export interface Stats extends Counts {
  readonly byKind: Readonly<Record<string, Counts>>
}

/**
 * What a cancel did to one id:
 * - "cancelled": it was waiting (due or scheduled); it never runs.
 * - "cancelledRunning": it was running; its holder is told to stop (at once on
 *   PostgreSQL, at its next lease renewal on SQLite) and can record nothing.
 * - "finished": it was done, dead or cancelled already (final): nothing changed.
 * - "unknown": no item has this id (never enqueued, or finished and pruned).
 */
export type CancelOutcome = "cancelled" | "cancelledRunning" | "finished" | "unknown"

/** Options of a cancel. */
export interface CancelOptions {
  /** Kept with the item: its last error reads `Cancelled: <reason>` (else `Cancelled`). */
  readonly reason?: string | undefined
}

/** Which dead items a retry or delete applies to. */
export type DeadSelection =
  | { readonly ids: ReadonlyArray<number> }
  | { readonly all: true; readonly kind?: string | undefined }

/** What one claim asks for: the worker's name, how many items, the lease, and which kinds. */
export interface ClaimOptions {
  readonly worker: string
  readonly limit: number
  readonly lease: Duration.DurationInput
  /** Claim only these kinds (default: every kind). */
  readonly kinds?: ReadonlyArray<string> | undefined
  /**
   * By kind, the budget of an item enqueued without `maxAttempts` (a worker
   * pool passes its handlers' `maxAttempts`); kinds not in it take the
   * service's `defaultMaxAttempts`. Each an integer from 1 to 10,000.
   */
  readonly maxAttemptsByKind?: ReadonlyMap<string, number> | undefined
  /**
   * The most items of globally limited kinds to take (default `limit`): a
   * pool passes its free slots, so an item of a limited kind never waits in
   * its prefetch buffer holding one of the kind's places (or having used one
   * of its starts) without running. From 0 to `limit`.
   */
  readonly limitedMax?: number | undefined
  /**
   * Read each item's stored trace context into its claim (`Claim.traceContext`;
   * default true). A worker pool that makes no spans asks for none: only a
   * run's span links to it (issue 34: a claim returns what its runs need).
   */
  readonly traceContext?: boolean | undefined
}

export type {
  GlobalLimits, GroupInfo, GroupListOptions, GroupPage, KindInfo, PerGroup, PerGroupInfo, Rate
} from "./internal/domainKinds.js"

/** One page of dead items, in id order. */
export interface DeadPageOptions {
  readonly kind?: string | undefined
  /** Items with an id greater than this (the previous page's last id). */
  readonly after?: number | undefined
  readonly limit?: number | undefined
}

/**
 * What a worker pool registers in the live-workers table (docket_workers):
 * who it is and what it claims. Its heartbeat adds what runs now.
 */
export interface WorkerRegistration {
  /** Unique per pool (its worker name and a random part): two pools of one name never share a row. */
  readonly id: string
  /** The pool's worker name, as recorded in `claimed_by` (two pools may share one). */
  readonly name: string
  readonly host: string
  readonly pid: number
  /** The kinds it claims, or null when it claims every kind. */
  readonly kinds: ReadonlyArray<string> | null
  /** Handlers it runs at once. */
  readonly concurrency: number
  /** Docket's version in that process. */
  readonly version: string
}

/** One heartbeat of a pool: its registration and what it runs now. */
export interface WorkerHeartbeat extends WorkerRegistration {
  /** Items running in the pool now. */
  readonly running: number
  /**
   * The start time an earlier heartbeat returned (database clock), kept if
   * the row has to be inserted again (it was removed meanwhile); none at the
   * first heartbeat, which takes the database's now.
   */
  readonly startedAt?: number | undefined
}

/**
 * A pool that heartbeats ("live"), or one silent for longer than the gone age
 * ("gone": killed, cut off from the database, or stalled).
 */
export type WorkerStatus = "live" | "gone"

/** A worker pool as the live-workers table shows it. Times are epoch ms on the database's clock. */
export interface WorkerInfo extends WorkerRegistration {
  /** Items running in it at its last heartbeat. */
  readonly running: number
  readonly startedAt: number
  readonly heartbeatAt: number
  /** Milliseconds from its last heartbeat to the database's now. */
  readonly heartbeatAgeMs: number
  readonly status: WorkerStatus
}

/** Options of `listWorkers`. */
export interface WorkerListOptions {
  /** A pool silent for longer than this is gone (default 15 s: three heartbeats at the longest interval). */
  readonly goneAfter?: Duration.DurationInput | undefined
}

/**
 * How long finished items are kept, by state, from the time they finished
 * (a `Duration` input or milliseconds, up to about 100 years, or "forever").
 * 0 deletes: a done item at its complete (no history, as before 0007), a
 * cancelled or dead one at the next prune pass. Defaults: done and cancelled
 * 24 hours, dead "forever" (kept for a person to read, retry or delete).
 */
export interface Retention {
  readonly done?: Duration.DurationInput | "forever" | undefined
  readonly cancelled?: Duration.DurationInput | "forever" | undefined
  readonly dead?: Duration.DurationInput | "forever" | undefined
}

/** What one prune did: how many finished items it deleted, by state. */
export interface PruneResult {
  readonly done: number
  readonly cancelled: number
  readonly dead: number
}

/** Options of `list`. */
export interface ListOptions {
  readonly state?: ListState | undefined
  readonly kind?: string | undefined
  /** Items per page, from 1 to 1,000 (default 50). */
  readonly limit?: number | undefined
  /** The `cursor` of the previous page, with the same state and kind (anything else is an InvalidInput). */
  readonly cursor?: string | undefined
}

/** One page of `list`, newest first; `cursor` gives the next page, null when this is the last. */
export interface ItemPage {
  readonly items: ReadonlyArray<Item>
  readonly cursor: string | null
}

/** An item as stored and its states (defined in Item.ts, which Insights.ts uses too). */
export type { AttemptError, FinishedState, Item, ListState, State } from "./Item.js"

/** The read model's types: what a dashboard and /metrics read (defined in Insights.ts). */
export type {
  FinishedMinute, GroupsDue, HorizonHolder, HorizonPrepared, HorizonReport, HorizonSession, HorizonSlot, HorizonThreshold, OldestDue,
  RetriedMinute, SearchOptions, SearchPage, Total
} from "./Insights.js"

/** The recurring schedules' types (defined in Recurring.ts, beside `Recurring.make`). */
export type { DeclareOutcome, ScheduleInfo, TickPass } from "./Recurring.js"
