/**
 * The interface of the storage service (`QueueRepo.Service`, re-exported
 * there for users): declared here, beside the parts that implement it, so
 * that QueueRepo.ts imports its parts and none of them imports it back.
 */
import type { Duration, Effect, Option } from "effect"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type {
  CancelOptions, CancelOutcome, Claim, ClaimOptions, DeadPageOptions, DeadSelection, EnqueueOptions, EnqueueRequest,
  EnqueueResult, FailNext, FailOutcome, Item, ReleaseOutcome, Stats
} from "../../Domain.js"

type E = StorageError
type EI = InvalidInput | StorageError

/** The storage service. */
export interface Service {
  readonly dialect: "pg" | "sqlite"
  /** Adds an item; joins the caller's transaction when there is one. */
  readonly enqueue: (kind: string, payload: unknown, options?: EnqueueOptions) => Effect.Effect<EnqueueResult, EI>
  /** Adds many items in one statement, dedupe respected; results in input order. */
  readonly enqueueMany: (requests: ReadonlyArray<EnqueueRequest>) => Effect.Effect<ReadonlyArray<EnqueueResult>, EI>
  /** Leases up to `limit` due items: highest priority first, then run-after, then id. */
  readonly claim: (options: ClaimOptions) => Effect.Effect<ReadonlyArray<Claim>, EI>
  /** Done: the item leaves the queue. False when the claim was stale. */
  readonly complete: (claim: Claim) => Effect.Effect<boolean, E>
  readonly completeMany: (claims: ReadonlyArray<Claim>) => Effect.Effect<ReadonlyArray<boolean>, E>
  /** Records a failure: retry later (when attempts remain) or dead. */
  readonly fail: (claim: Claim, error: string, next: FailNext) => Effect.Effect<FailOutcome, EI>
  readonly failMany: (
    failures: ReadonlyArray<{ readonly claim: Claim; readonly error: string; readonly next: FailNext }>
  ) => Effect.Effect<ReadonlyArray<FailOutcome>, EI>
  /** Gives the item back unrun: waiting again, this attempt not counted. */
  readonly release: (claim: Claim) => Effect.Effect<ReleaseOutcome, E>
  readonly releaseMany: (claims: ReadonlyArray<Claim>) => Effect.Effect<ReadonlyArray<ReleaseOutcome>, E>
  /** Renews the lease for `lease` from now. False when the claim was stale. */
  readonly extend: (claim: Claim, lease: Duration.DurationInput) => Effect.Effect<boolean, EI>
  readonly extendMany: (
    claims: ReadonlyArray<Claim>,
    lease: Duration.DurationInput
  ) => Effect.Effect<ReadonlyArray<boolean>, EI>
  readonly stats: Effect.Effect<Stats, E>
  readonly get: (id: number) => Effect.Effect<Option.Option<Item>, E>
  readonly listDead: (options?: DeadPageOptions) => Effect.Effect<ReadonlyArray<Item>, EI>
  /** Dead items back to waiting with a fresh attempt budget; returns their ids. */
  readonly retryDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, EI>
  readonly deleteDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, EI>
  /**
   * Stops items by id, atomically (one statement): a waiting or scheduled
   * item is cancelled at once and never runs; a running one is cancelled and
   * its holder interrupts its run (within about a second on PostgreSQL, at
   * its next lease renewal on SQLite, at once for a pool of this process) and
   * can record nothing after it. A cancelled item is final: kept with state
   * `cancelled` and last error `Cancelled` (`Cancelled: <reason>`), never
   * claimed again. Dead and cancelled items are left as they are ("finished").
   * One outcome per id, in input order (a repeated id has its one outcome
   * each time). Joins the caller's transaction when there is one.
   */
  readonly cancel: (ids: ReadonlyArray<number>, options?: CancelOptions) => Effect.Effect<ReadonlyArray<CancelOutcome>, EI>
  /**
   * Time until the pool has something new to claim: the next waiting item that
   * is not yet due (enqueued with a delay or run-after time, or retried after a
   * backoff) becomes due, or the next lease ends (zero if one has ended). Items
   * already due are not reported: a claim takes them. None when neither exists.
   */
  readonly nextDueIn: Effect.Effect<Option.Option<Duration.Duration>, E>
}
