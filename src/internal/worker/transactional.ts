/**
 * A `transactional` handler's run (Handler.Options.transactional): the
 * handler runs inside one transaction of the queue's database, and its
 * item's completion is written in that same transaction, fenced by the
 * claim's token. The handler's own writes (through the `SqlClient` it is
 * given) and the item's `done` commit together or not at all:
 *
 * - the handler fails (or its result cannot be kept): its writes roll back,
 *   and the failure is recorded as any other (retry, snooze, dead...);
 * - the completion finds its lease taken (another worker claimed the item
 *   after this lease ran out) or the item cancelled: everything rolls back,
 *   and nothing is recorded (`Stale`), as for any refused write;
 * - the process dies, or the run is interrupted (lease lost, cancel,
 *   shutdown past its grace): the transaction never commits, and the item
 *   runs again once its lease ends, with nothing of this run applied;
 * - BEGIN, a statement of the store or COMMIT fails: rolled back, recorded
 *   as a retry (`TransactionFailed`), so an attempt counts and a database
 *   that keeps failing ends the item dead instead of looping. (A COMMIT whose
 *   answer was lost may have committed: the retry's write is then refused by
 *   its fence, the item being done.)
 *
 * So a message changes an actor's state exactly once however often the item
 * runs. What it costs: a connection of the pool held for the run (the pool
 * caps transactional runs at once: `Worker.Options.transactions`), and a
 * completion of its own (no batching with other items). On SQLite the
 * transaction starts with the fenced lease renewal, a write: it holds the
 * file's write lock for the whole run (its reads never meet a snapshot made
 * stale by another process), so every other writer on the file waits: keep
 * such handlers short there.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Claim } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"
import type { Outcome } from "../decide.js"

/**
 * What a transactional run came to: committed (the handler's writes and the
 * item's completion), stale (rolled back: the lease was taken or the item
 * cancelled; nothing to record), or rolled back with the outcome to record
 * as usual (the handler's failure, a result that cannot be kept, a failed
 * transaction).
 */
export type TxEnd = Committed | StaleEnd | Outcome<number | undefined>
/** Committed: the handler's writes and the item's completion. */
export interface Committed {
  readonly _tag: "Committed"
}
/** Rolled back: the lease was taken or the item cancelled; nothing is recorded. */
export interface StaleEnd {
  readonly _tag: "Stale"
}

// Why the transaction rolled back, carried out of it as its failure.
class Settled {
  constructor(readonly outcome: Outcome<number | undefined>) {}
}
class Stale {}
const STALE = new Stale()
const STALE_END: StaleEnd = { _tag: "Stale" }
const COMMITTED: Committed = { _tag: "Committed" }

/**
 * Runs `run` and the completion of `claim` (held for `leaseMs`) in one transaction. `decided`
 * turns the run's exit into its outcome (the executor's rules); only a
 * `Done` is written here.
 */
export const runInTransaction = <A, R>(
  repo: QueueRepo.Service,
  claim: Claim,
  leaseMs: number,
  run: Effect.Effect<A, unknown, R>,
  decided: (run: Effect.Effect<A, unknown, R>) => Effect.Effect<Outcome<number | undefined>, never, R>
): Effect.Effect<TxEnd, never, R> => {
  const body = Effect.gen(function*() {
    if (repo.dialect === "sqlite") {
      // The write lock first, and this lease still ours (else nothing runs).
      const held = yield* repo.extend(claim, Duration.millis(leaseMs))
      if (!held) return yield* Effect.fail(STALE)
    }
    const outcome = yield* decided(run)
    if (outcome._tag !== "Done") return yield* Effect.fail(new Settled(outcome))
    const [applied] = yield* repo.completeMany([outcome.result === undefined ? claim : { claim, result: outcome.result }])
    if (!applied) return yield* Effect.fail(STALE)
  })
  return repo.transaction(body).pipe(
    Effect.as<TxEnd>(COMMITTED),
    Effect.catchAll((error): Effect.Effect<TxEnd, never, R> => {
      if (error instanceof Stale) return Effect.succeed(STALE_END)
      if (error instanceof Settled) return Effect.succeed(error.outcome)
      return Effect.succeed({ _tag: "Retry", error: `TransactionFailed: ${error.message}`, delayMs: undefined })
    })
  )
}
