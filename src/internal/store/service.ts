/**
 * The interface of the storage service (`QueueRepo.Service`, re-exported
 * there for users): declared here, beside the parts that implement it, so
 * that QueueRepo.ts imports its parts and none of them imports it back.
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type {
  CancelOptions, CancelOutcome, Claim, ClaimOptions, Completion, DeadPageOptions, DeadSelection, DeclareOutcome,
  EnqueueOptions, EnqueueRequest, EnqueueResult, FailNext, FailOutcome, FinishedMinute, GlobalLimits, GroupListOptions, GroupPage, Item, ItemPage, PerGroup,
  GroupsDue, HorizonReport, HorizonThreshold, KindInfo, ListOptions, OldestDue, PruneResult, ReleaseOutcome, RetriedMinute, ScheduleInfo, SearchOptions, SearchPage, SnoozeOutcome,
  SnoozeRequest, Stats, TickPass, Total, WorkerHeartbeat, WorkerInfo, WorkerListOptions
} from "../../Domain.js"
import type { Declaration } from "../../Recurring.js"

type E = StorageError
type EI = InvalidInput | StorageError

/** The storage service. */
export interface Service {
  readonly dialect: "pg" | "sqlite"
  /**
   * Runs `effect` in one transaction of this store's database (joining the
   * caller's, if any): the store's operations inside it, and the
   * application's statements through any `SqlClient` of the same database,
   * commit together or not at all. `effect`'s failure rolls the transaction
   * back and is returned as it is; a failed BEGIN, COMMIT or ROLLBACK is a
   * `StorageError`. On SQLite the transaction holds the file's one
   * connection (and, from its first write, the write lock) until it ends.
   */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StorageError, R>
  /** Adds an item; joins the caller's transaction when there is one. */
  readonly enqueue: (kind: string, payload: unknown, options?: EnqueueOptions) => Effect.Effect<EnqueueResult, EI>
  /** Adds many items in one statement, dedupe respected; results in input order. */
  readonly enqueueMany: (requests: ReadonlyArray<EnqueueRequest>) => Effect.Effect<ReadonlyArray<EnqueueResult>, EI>
  /** Leases up to `limit` due items: highest priority first, then run-after, then id. */
  readonly claim: (options: ClaimOptions) => Effect.Effect<ReadonlyArray<Claim>, EI>
  /**
   * Done: the item is kept as `done` with its result (a JSON value; none when
   * undefined) and finish time, who ran it kept in `claimedBy`, until the
   * retention of done items passes; with a retention of 0 it is deleted at
   * once. False when the claim was stale. A result that is not JSON or is
   * larger than `maxResultBytes` is an InvalidInput and changes nothing
   * (with a retention of 0 a result has nowhere to go: it is dropped unchecked).
   */
  readonly complete: (claim: Claim, result?: unknown) => Effect.Effect<boolean, EI>
  /** As `complete`, in one statement; a claim alone completes without a result. One bad result refuses the batch. */
  readonly completeMany: (completions: ReadonlyArray<Claim | Completion>) => Effect.Effect<ReadonlyArray<boolean>, EI>
  /** The largest result `complete` accepts, as JSON bytes (a worker pool checks its handlers' results against it). */
  readonly maxResultBytes: number
  /** Records a failure: retry later (when attempts remain) or dead. */
  readonly fail: (claim: Claim, error: string, next: FailNext) => Effect.Effect<FailOutcome, EI>
  readonly failMany: (
    failures: ReadonlyArray<{ readonly claim: Claim; readonly error: string; readonly next: FailNext }>
  ) => Effect.Effect<ReadonlyArray<FailOutcome>, EI>
  /** Gives the item back unrun: waiting again, this attempt not counted. */
  readonly release: (claim: Claim) => Effect.Effect<ReleaseOutcome, E>
  readonly releaseMany: (claims: ReadonlyArray<Claim>) => Effect.Effect<ReadonlyArray<ReleaseOutcome>, E>
  /**
   * Puts the item back for later, as its handler asked (the `Snooze`
   * outcome): waiting, due `delay` after the database's now, this attempt not
   * counted, its `snoozes` one higher. A keyed item whose key a waiting twin
   * holds is absorbed instead. A delay that is not from 0 to about 100 years
   * is an InvalidInput and changes nothing. The cap on snoozes is the
   * caller's (a worker pool applies its handler's `maxSnoozes`).
   */
  readonly snooze: (claim: Claim, delay: Duration.DurationInput) => Effect.Effect<SnoozeOutcome, EI>
  readonly snoozeMany: (snoozes: ReadonlyArray<SnoozeRequest>) => Effect.Effect<ReadonlyArray<SnoozeOutcome>, EI>
  /** Renews the lease for `lease` from now. False when the claim was stale. */
  readonly extend: (claim: Claim, lease: Duration.DurationInput) => Effect.Effect<boolean, EI>
  readonly extendMany: (
    claims: ReadonlyArray<Claim>,
    lease: Duration.DurationInput
  ) => Effect.Effect<ReadonlyArray<boolean>, EI>
  readonly stats: Effect.Effect<Stats, E>
  readonly get: (id: number) => Effect.Effect<Option.Option<Item>, E>
  /** The items among these ids, in id order, in one statement (ids that name no item are left out). */
  readonly getMany: (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<Item>, E>
  readonly listDead: (options?: DeadPageOptions) => Effect.Effect<ReadonlyArray<Item>, EI>
  /** Dead items back to waiting with a fresh attempt budget (and no snoozes counted); returns their ids. */
  readonly retryDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, EI>
  readonly deleteDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, EI>
  /**
   * A page of items, newest first: finished states (done, dead, cancelled) by
   * finish time, the others (and no state) by id; of one kind if given. The
   * page's `cursor` gives the next (null after the last); with the same state
   * and kind, every item is listed once across the pages, however many are
   * added or pruned meanwhile (added ones, newer, are not on later pages).
   * A bad state, kind, limit or cursor is an InvalidInput.
   */
  readonly list: (options?: ListOptions) => Effect.Effect<ItemPage, EI>
  /**
   * Deletes finished items whose retention has passed (the service's
   * `retention`), the oldest first, at most 1,000 per state per call; how
   * many of each. A worker pool's pruner calls it (again while a batch comes
   * back full). Concurrent prunes never take the same row. Each call also
   * deletes up to 1,000 retry counts per minute older than a day (not in
   * the result, which counts items).
   */
  readonly prune: Effect.Effect<PruneResult, E>
  /**
   * Stops items by id, atomically (one statement): a waiting or scheduled
   * item is cancelled at once and never runs; a running one is cancelled and
   * its holder interrupts its run (within about a second on PostgreSQL, at
   * its next lease renewal on SQLite, at once for a pool of this process) and
   * can record nothing after it. A cancelled item is final: kept with state
   * `cancelled` and last error `Cancelled` (`Cancelled: <reason>`), never
   * claimed again. Done, dead and cancelled items are left as they are ("finished").
   * One outcome per id, in input order (a repeated id has its one outcome
   * each time). Joins the caller's transaction when there is one.
   */
  readonly cancel: (ids: ReadonlyArray<number>, options?: CancelOptions) => Effect.Effect<ReadonlyArray<CancelOutcome>, EI>
  /**
   * Time until the pool has something new to claim: the next waiting item that
   * is not yet due (enqueued with a delay or run-after time, or retried after a
   * backoff) becomes due, or the next lease ends (zero if one has ended). Items
   * already due are not reported: a claim takes them. None when neither exists.
   * On PostgreSQL, while this store's claims go on from cursors (another
   * session holds vacuum back: migrations/pg/0015_claim_cursor.sql), the
   * leases' ends are left out.
   */
  readonly nextDueIn: Effect.Effect<Option.Option<Duration.Duration>, E>
  /**
   * A page of a kind's groups with unfinished items, in group order: each
   * with its items by state, its first item and whether a failure holds it
   * (an ordered group whose first item waits for its retry). The page's
   * `cursor` gives the next (null after the last). A bad kind, limit (1 to
   * 1,000) or cursor is an InvalidInput.
   */
  readonly listGroups: (kind: string, options?: GroupListOptions) => Effect.Effect<GroupPage, EI>
  /** Every kind with items or controls: paused, limits, who set them, counts by state; by kind. */
  readonly listKinds: Effect.Effect<ReadonlyArray<KindInfo>, E>
  /** No worker starts an item of the kind until it is resumed (running ones finish; enqueues are kept). */
  readonly pauseKind: (kind: string) => Effect.Effect<void, EI>
  /** Workers start the kind's items again; idle pools are woken at once. */
  readonly resumeKind: (kind: string) => Effect.Effect<void, EI>
  /**
   * No worker starts an item of the kind's group until it is resumed (running
   * ones finish; enqueues are kept; the kind's other groups go on). Works for
   * a kind with or without `perGroup`. An `InvalidInput` on `kind` or `group`
   * changes nothing; pausing a paused group changes nothing.
   */
  readonly pauseGroup: (kind: string, group: string) => Effect.Effect<void, EI>
  /** Workers start the group's items again; idle pools are woken at once. Resuming a group not paused changes nothing. */
  readonly resumeGroup: (kind: string, group: string) => Effect.Effect<void, EI>
  /**
   * A person's global limits for the kind (null removes one, undefined keeps
   * it). They win over a handler's declaration until `resetKindLimits`.
   */
  readonly setKindLimits: (kind: string, limits: GlobalLimits) => Effect.Effect<void, EI>
  /**
   * A handler's declared limits (what a worker pool writes at start): applied
   * unless a person set the kind's limits. True when something changed.
   */
  readonly declareKindLimits: (kind: string, limits: GlobalLimits) => Effect.Effect<boolean, EI>
  /**
   * A handler's declared group limits (`Handler.Options.perGroup`; undefined:
   * none), written by a worker pool at start: the last pool to start wins.
   * True when something changed. An `InvalidInput` on `perGroup` changes nothing.
   */
  readonly declarePerGroup: (kind: string, perGroup: PerGroup | undefined) => Effect.Effect<boolean, EI>
  /**
   * A person's group limits for the kind (`perGroup`'s concurrency, an
   * integer from 1 to 10,000, and rate; null removes one, undefined keeps
   * it). They win over handlers' declarations until `resetKindLimits`; the
   * declarations' other settings (ordered, onFailure, onDead) still apply.
   * An `InvalidInput` on `perGroup` changes nothing.
   */
  readonly setGroupLimits: (kind: string, limits: GlobalLimits) => Effect.Effect<void, EI>
  /**
   * Hands the kind's limits back to its code: none until a worker declaring
   * some starts. Its group limits too, where a person set them.
   */
  readonly resetKindLimits: (kind: string) => Effect.Effect<void, EI>
  /**
   * A worker pool's heartbeat in the live-workers table: the first one
   * registers it; each later one renews its running count and heartbeat time
   * (database clock), and inserts the row again if it was removed meanwhile.
   * Returns the row's start time (database clock), for the next heartbeats.
   */
  readonly heartbeatWorker: (heartbeat: WorkerHeartbeat) => Effect.Effect<number, EI>
  /** Removes a pool's row (its graceful stop). False when there was none. */
  readonly removeWorker: (id: string) => Effect.Effect<boolean, EI>
  /** Removes the rows of pools whose last heartbeat is older than `silentFor`; returns their ids. */
  readonly pruneWorkers: (silentFor: Duration.DurationInput) => Effect.Effect<ReadonlyArray<string>, EI>
  /** Every registered pool, live and gone, by name then id; its status from its heartbeat's age on the database's clock. */
  readonly listWorkers: (options?: WorkerListOptions) => Effect.Effect<ReadonlyArray<WorkerInfo>, EI>
  /**
   * A pool's declaration of a recurring schedule (checked: `Recurring.check`),
   * at its start: added with its first tick after now; kept as stored; or, when
   * no pool touched it for 15 s (all stopped), the ticks missed since enqueued
   * under its `missed` mode; a changed expression or zone goes on from its own
   * next tick. The stored kind, payload and mode become this declaration's.
   */
  readonly declareSchedule: (declaration: Declaration) => Effect.Effect<DeclareOutcome, EI>
  /**
   * One compare-and-set of a schedule: enqueues the ticks due from `expected`
   * (the next tick as the caller read it) by the database's now, at most 1,000,
   * and moves its next tick past them, in one transaction; `ticked` false (and
   * nothing enqueued) when its next tick was no longer `expected`.
   */
  readonly tickSchedule: (
    name: string,
    expected: number
  ) => Effect.Effect<{ readonly ticked: boolean; readonly items: ReadonlyArray<number> }, EI>
  /** One pass over these schedules: each one's due ticks enqueued by `tickSchedule`; when the next is due. */
  readonly tickSchedules: (names: ReadonlyArray<string>) => Effect.Effect<TickPass, EI>
  /** Marks these schedules as declared by a live pool now (a pool does it every 5 s). */
  readonly touchSchedules: (names: ReadonlyArray<string>) => Effect.Effect<void, E>
  /** Every stored schedule by name, live or stopped, with its next and last tick and the last tick's item. */
  readonly listSchedules: Effect.Effect<ReadonlyArray<ScheduleInfo>, E>
  /**
   * Per kind with due items (waiting and due, or running with an ended
   * lease), how long its oldest due item has been due, on the database's
   * clock: the latency to alert on. A paused kind's items count (they wait).
   */
  readonly oldestDue: Effect.Effect<ReadonlyArray<OldestDue>, E>
  /**
   * Per kind whose groups the claim limits (a `perGroup` concurrency, or a
   * paused group), by kind: its due items that their group holds back, and
   * how long its oldest due item that its group lets start has waited.
   */
  readonly groupsDue: Effect.Effect<ReadonlyArray<GroupsDue>, E>
  /**
   * Items finished (done, dead, cancelled) in each minute of the last
   * `minutes` (default 60, at most 1,440), by kind and state, oldest minute
   * first; minutes with none are left out. Read from the kept history, so a
   * retention shorter than the window undercounts.
   */
  readonly finishedPerMinute: (minutes?: number) => Effect.Effect<ReadonlyArray<FinishedMinute>, EI>
  /**
   * Failed attempts sent back to waiting (retried) in each minute of the last
   * `minutes` (default 60, at most 1,440), by kind, oldest minute first;
   * minutes with none are left out. Counted by fail as it retries
   * (docket_minute_counts, migration 0009), kept a day.
   */
  readonly retriedPerMinute: (minutes?: number) => Effect.Effect<ReadonlyArray<RetriedMinute>, EI>
  /**
   * Every item that ever finished in each state, and every retry, by kind
   * (`Total`): counts that never fall, for counters (/metrics'
   * docket_finished_total, docket_retried_total). One statement over every
   * finished item: for a scrape, not a hot path.
   */
  readonly totals: Effect.Effect<ReadonlyArray<Total>, E>
  /**
   * Items by state, kind, dedupe key and a text in the payload or last error,
   * newest first by id, a page at a time. Each page reads at most
   * `SearchPage.scanCap` rows (10,000), so a rare match may take several
   * pages, some empty but with a cursor. A bad filter or cursor is an InvalidInput.
   */
  readonly searchItems: (options?: SearchOptions) => Effect.Effect<SearchPage, EI>
  /**
   * Who holds back the xmin horizon of the queue's PostgreSQL database past
   * `threshold` (`HorizonThreshold`: 5 minutes or 100,000 transactions by
   * default): sessions of this database with a transaction open longer,
   * replication slots and standbys' feedback with an older xmin, prepared
   * transactions prepared longer ago; none on SQLite, which has no horizon.
   * Vacuum cannot remove what the queue deletes or updates while it is held,
   * and claims slow down as dead rows pile up (docs/operations.md). One
   * statement over system views; a bad threshold is an InvalidInput on "horizon".
   */
  readonly horizon: (threshold?: HorizonThreshold) => Effect.Effect<Option.Option<HorizonReport>, EI>
  /**
   * Scheduled items (waiting, due later) due now ("run now"); their ids.
   * Others (due already, running, finished, unknown) are left as they are.
   * Idle pools are woken (LISTEN on PostgreSQL, this process's at once).
   */
  readonly runNow: (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<number>, EI>
}
