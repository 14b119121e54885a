/**
 * Cancels: the pool stops its runs of items a cancel stopped
 * (`QueueRepo.cancel`, `docket cancel`), and drops its buffered claims of
 * them before they start.
 *
 * Notices come through the wake-ups (a cancel through this process's
 * `QueueRepo`; on PostgreSQL, a notification from a cancel in any process,
 * delivered at its commit). One fiber takes them in batches. A notice is only
 * a hint: the items' states are read first, and only items stored as
 * cancelled are stopped (a notice sent inside a transaction that rolled back,
 * or by anyone else with pg_notify, stops nothing). Without a notice (SQLite
 * across processes, a pool of an earlier version, a lost LISTEN connection)
 * the renewer finds out: the cancel changed the claim's token, so the renewal
 * is refused, and `markCancelled` tells a cancel from a lease another worker
 * took, so the logs and events say which.
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Claim } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { type Budget, forkDetached, interruptWithin } from "./bounded.js"
import type { Part } from "./part.js"
import type { PoolState, Running } from "./state.js"

/** What the cancels part needs from the pool. */
export interface CancelsDeps {
  readonly repo: QueueRepo.Service
  readonly state: PoolState
  /** Stops a run (marked lost and cancelled already): the pool interrupts it. */
  readonly stop: (entry: Running) => Effect.Effect<void>
  /** A buffered claim of a cancelled item, taken out before it started; `error` its last error. */
  readonly dropped: (claim: Claim, error: string) => Effect.Effect<void>
}

/**
 * The last errors of the items among `ids` stored as cancelled, read in one
 * statement. Items that cannot be read (the database is down) count as not
 * cancelled: a refused renewal is then a lost lease, as before cancels existed.
 */
export const cancelledAmong = (repo: QueueRepo.Service, ids: Iterable<number>): Effect.Effect<Map<number, string>> =>
  repo.getMany([...ids]).pipe(
    Effect.map((items) =>
      new Map(items.flatMap((item) => (item.state === "cancelled" ? [[item.id, item.lastError ?? "Cancelled"] as const] : [])))
    ),
    Effect.orElseSucceed(() => new Map<number, string>())
  )

/** Marks the runs among `entries` whose items are stored as cancelled (`cancelled`: their last error). */
export const markCancelled = (repo: QueueRepo.Service, entries: ReadonlyArray<Running>): Effect.Effect<void> =>
  entries.length === 0 ? Effect.void : Effect.map(cancelledAmong(repo, entries.map((e) => e.claim.id)), (cancelled) => {
    for (const entry of entries) entry.cancelled = cancelled.get(entry.claim.id) ?? entry.cancelled
  })

/** The part, with an empty queue of notices (`run`, forked at start, acts on them). */
export const make = (deps: CancelsDeps): Effect.Effect<Cancels> =>
  Effect.map(Queue.unbounded<ReadonlyArray<number>>(), (notices) => new Cancels(deps, notices))

/**
 * The pool's cancel notices and the fiber that acts on them; see the module
 * doc. Stopped after the grace: a cancel heard while running items finish
 * still stops its run.
 */
export class Cancels implements Part {
  readonly name = "cancels"
  private fiber: Fiber.RuntimeFiber<never> | undefined

  /** Built by `make`. */
  constructor(private readonly deps: CancelsDeps, private readonly notices: Queue.Queue<ReadonlyArray<number>>) {}

  /** Forks `run` in `scope`. */
  start(scope: Scope.Scope): Effect.Effect<void> {
    return Effect.map(forkDetached(this.run, scope), (fiber) => {
      this.fiber = fiber
    })
  }

  /** Stops acting on notices (within what is left of `budget`). */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => (this.fiber === undefined ? Effect.void : interruptWithin(this.fiber, budget.left)))
  }

  /** Running items were cancelled (their ids): safe from any callback. */
  readonly notice = (ids: ReadonlyArray<number>): void => {
    if (ids.length > 0) Queue.unsafeOffer(this.notices, ids)
  }

  /** Acts on the notices as they come, for ever. */
  get run(): Effect.Effect<never> {
    return Queue.take(this.notices).pipe(
      Effect.flatMap((first) => Effect.map(Queue.takeAll(this.notices), (rest) => new Set([first, ...rest].flat()))),
      Effect.flatMap((ids) => this.handle(ids)),
      Effect.forever
    )
  }

  // The runs and buffered claims of these items, stopped and dropped once
  // their items are read as cancelled.
  private handle(ids: ReadonlySet<number>): Effect.Effect<void> {
    const { dropped, repo, state, stop } = this.deps
    const runsOf = (of: ReadonlySet<number>) => [...state.running].filter((e) => !e.lost && of.has(e.claim.id))
    const held = new Set([...runsOf(ids).map((e) => e.claim.id), ...state.buffer.heldAmong(ids)])
    if (held.size === 0) return Effect.void
    return Effect.flatMap(cancelledAmong(repo, held), (cancelled) => {
      if (cancelled.size === 0) return Effect.void
      const of = new Set(cancelled.keys())
      // Read again after the reads: a run may have ended meanwhile (its
      // outcome is then refused as stale) or been stopped by the renewer.
      const runs = runsOf(of)
      for (const entry of runs) {
        entry.lost = true
        entry.cancelled = cancelled.get(entry.claim.id)
      }
      const claims = state.buffer.takeItems(of)
      return Effect.zipRight(
        Effect.forEach(runs, stop, { discard: true }),
        Effect.forEach(claims, (claim) => dropped(claim, cancelled.get(claim.id)!), { discard: true })
      )
    })
  }
}
