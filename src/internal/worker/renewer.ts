/**
 * The lease renewer: every third of the lease, one fenced statement extends
 * the leases of every running item, and of every item whose handler ended but
 * whose outcome is not written yet (the database is slow or down): otherwise
 * another worker would run them again.
 *
 * A renewal that finds a lease taken by another worker, or an item cancelled
 * (the cancel changed its token), or that cannot reach the database until the
 * lease surely ran out, calls `onLost` for that run: the pool interrupts it
 * and records nothing. The items of refused renewals are read first, so a
 * cancelled one is marked as such (`cancelled`): it is logged and published
 * as a cancel, not as a lost lease.
 *
 * A run's deadline (sent + lease of its last renewal, or of its claim, by
 * this process's clock: never later than the database's lease) is a hard
 * one: from then on another worker may claim the item, so a run that gets to
 * its deadline without a renewal stops then. A round finds runs already past
 * it lost without asking (an answer would come too late to matter), and
 * waits for the database's answer at most until the earliest deadline of the
 * others. On a database gone silent (a partition: no answer, no error) the
 * statement would otherwise wait until TCP gives up, and the next round would
 * never come: the runs would go on after another worker took their items. So
 * at the deadline the runs stop, and the next round tries again. The
 * statement cut off is interrupted in the background (bounded.ts): its
 * connection is closed.
 *
 * After a renewal that failed (a server restarting or failing over refuses
 * connections or closes them at once), rounds come more often as a deadline
 * nears, half the time left each (`nextRoundIn`), so the runs get every
 * chance to be renewed before it and stop at it. Measured before, in the
 * failover scenario (test/reliability/failover.ts, lease 2 s): with the next
 * round a third of the lease after the failure, and a round after a deadline
 * still sending its renewal (waiting at least a sixth of the lease), a run
 * went on 0.4 s beside the run of the worker that had taken its item from the
 * new primary meanwhile (in 3 of 8 runs).
 *
 * Each renewal's round trip is measured. A lease too short for it (a round
 * trip over a sixth of the lease: two rounds that slow, back to back, leave
 * a third of the lease before it runs out) is logged once per pool, as a
 * warning naming the lease to use.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Claim } from "../../Domain.js"
import { StorageError } from "../../Errors.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { boundedWait, type Budget, forkDetached, interruptWithin } from "./bounded.js"
import { markCancelled } from "./cancels.js"
import type { Publisher } from "./events.js"
import type { Part } from "./part.js"
import * as Stall from "./stall.js"
import type { Running } from "./state.js"

/** What the renewer needs from the pool. */
export interface RenewerDeps {
  readonly repo: QueueRepo.Service
  readonly leaseMs: number
  /** The runs in progress. */
  readonly running: ReadonlySet<Running>
  /** The claims whose outcomes are not written yet. */
  readonly unrecorded: () => ReadonlyArray<Claim>
  readonly publisher: Publisher
  /** A run whose lease is lost or whose item was cancelled: marked `lost` (and `cancelled`) already; the pool stops it. */
  readonly onLost: (entry: Running) => Effect.Effect<void>
  /** Time source (ms, monotonic): performance.now by default. */
  readonly now?: (() => number) | undefined
}

/** A renewal's round trip over this share of the lease is warned of. */
export const SLOW_RENEWAL_SHARE = 1 / 6

// The pools already warned of a lease too short for their round trip (once per pool).
const warned = new WeakSet<RenewerDeps>()

/**
 * How long one renewal may wait: until the earliest deadline of the runs it
 * carries (none is past it: those were lost without asking), at most the lease.
 */
export const renewalBound = (deadlines: ReadonlyArray<number>, leaseMs: number, now: number): number => {
  const earliest = deadlines.reduce((a, b) => Math.min(a, b), Infinity)
  return Math.max(0, Math.min(leaseMs, earliest - now))
}

const slowWarning = (deps: RenewerDeps, rttMs: number) => {
  if (rttMs <= deps.leaseMs * SLOW_RENEWAL_SHARE || warned.has(deps)) return Effect.void
  warned.add(deps)
  return Effect.logWarning(
    `docket: a lease renewal took ${Math.round(rttMs)} ms, more than a sixth of the ${deps.leaseMs} ms lease: ` +
      `leases may be lost when the database slows further; use a lease of at least ${Math.ceil(rttMs / SLOW_RENEWAL_SHARE / 1000)} s ` +
      `(six round trips)`
  )
}

/** One renewal round. */
export const renewOnce = (deps: RenewerDeps): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { leaseMs, onLost, repo, running } = deps
    const now = deps.now ?? (() => performance.now())
    const lose = (entry: Running) => {
      entry.lost = true
      return onLost(entry)
    }
    const sent = now()
    const held = [...running].filter((e) => !e.lost)
    // Past the deadline: another worker may hold the item already.
    const overdue = held.filter((e) => sent >= e.deadline)
    const entries = held.filter((e) => sent < e.deadline)
    const unrecorded = deps.unrecorded()
    const renew = entries.length === 0 && unrecorded.length === 0
      ? Effect.void
      : extendAll(deps, entries, unrecorded, sent, lose, now)
    return Effect.zipRight(Effect.forEach(overdue, lose, { discard: true }), renew)
  })

// The round's one statement: the leases of `entries` (none past its deadline
// at `sent`) and of `unrecorded`, bounded by the earliest deadline.
const extendAll = (
  deps: RenewerDeps,
  entries: ReadonlyArray<Running>,
  unrecorded: ReadonlyArray<Claim>,
  sent: number,
  lose: (entry: Running) => Effect.Effect<void>,
  now: () => number
): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { leaseMs, publisher, repo, running } = deps
    const boundMs = renewalBound(entries.map((e) => e.deadline), leaseMs, sent)
    const extend = boundedWait(
      repo.extendMany([...entries.map((e) => e.claim), ...unrecorded], Duration.millis(leaseMs)),
      boundMs
    ).pipe(
      Effect.flatMap(Option.match({
        onNone: () =>
          Effect.fail(
            new StorageError({
              operation: "extend lease",
              cause: new Error(`no answer within ${Math.round(boundMs)} ms (the database is silent or too slow)`)
            })
          ),
        onSome: Effect.succeed
      }))
    )
    return extend.pipe(
      Effect.tap(() => slowWarning(deps, now() - sent)),
      Effect.tap(() => publisher.storageWorked("extend lease")),
      Effect.flatMap((applied) => {
        const refused = entries.filter((entry, i) => {
          if (applied[i]) entry.deadline = sent + leaseMs
          return !applied[i]
        })
        return refused.length === 0 ? Effect.void : Effect.zipRight(
          markCancelled(repo, refused),
          // Still running, and not stopped meanwhile (by a cancel notice).
          Effect.forEach(refused, (entry) => (running.has(entry) && !entry.lost ? lose(entry) : Effect.void), {
            discard: true
          })
        )
      }),
      Effect.catchAll((error) =>
        Effect.zipRight(
          publisher.storageFailed("extend lease")(error),
          // Cannot renew: once a lease has surely run out, another worker may
          // run the item, so this run stops.
          Effect.forEach(entries, (e) => (running.has(e) && !e.lost && now() >= e.deadline ? lose(e) : Effect.void), {
            discard: true
          })
        )
      )
    )
  })

/**
 * How long after a round the next one starts: a third of the lease, or half
 * the time left before the earliest deadline when that is shorter (after a
 * renewal that failed; after one that worked, two thirds of the lease are
 * left), at least 10 ms: a run still unrenewed at its deadline is lost at most
 * 10 ms after it.
 */
export const nextRoundIn = (deadlines: ReadonlyArray<number>, leaseMs: number, now: number): number => {
  const earliest = deadlines.reduce((a, b) => Math.min(a, b), Infinity)
  return Math.max(10, Math.min(Math.floor(leaseMs / 3), Math.ceil((earliest - now) / 2)))
}

/**
 * Renews every third of the lease, more often as a deadline nears
 * (`nextRoundIn`), for ever; beside it the stall watch says when the event
 * loop was blocked long enough to lose leases.
 */
export const run = (deps: RenewerDeps): Effect.Effect<never> => {
  const now = deps.now ?? (() => performance.now())
  const pause = Effect.suspend(() => {
    const deadlines = [...deps.running].filter((e) => !e.lost).map((e) => e.deadline)
    return Effect.sleep(Duration.millis(nextRoundIn(deadlines, deps.leaseMs, now())))
  })
  return Effect.zipRight(
    Effect.fork(Stall.watch({ leaseMs: deps.leaseMs, held: () => deps.running.size + deps.unrecorded().length })),
    Effect.forever(Effect.zipRight(renewOnce(deps), pause))
  )
}

/**
 * The renewer as a part: `run` forked at start; stopped once the outcomes are
 * written (until then it keeps their leases).
 */
export class Renewer implements Part {
  readonly name = "renewer"
  private fiber: Fiber.RuntimeFiber<never> | undefined

  /** Built by `make`. */
  constructor(private readonly deps: RenewerDeps) {}

  /** Forks `run` in `scope`. */
  start(scope: Scope.Scope): Effect.Effect<void> {
    return Effect.map(forkDetached(run(this.deps), scope), (fiber) => {
      this.fiber = fiber
    })
  }

  /** Stops renewing (within what is left of `budget`). */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => (this.fiber === undefined ? Effect.void : interruptWithin(this.fiber, budget.left)))
  }
}

/** The renewer part. */
export const make = (deps: RenewerDeps): Effect.Effect<Renewer> => Effect.sync(() => new Renewer(deps))
