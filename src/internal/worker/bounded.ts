/**
 * Bounded waits, for the shutdown path and the renewer. Shutdown runs as the
 * scope's finalizer, which is uninterruptible: every bounded wait in it is
 * made interruptible, or its timeout could never fire.
 *
 * A wait that times out does not wait for the interruption of what it waited
 * on either (`Effect.disconnect`): interrupting a statement sends it a cancel
 * and waits for it to end, up to 5 s (../directPool.ts), and on a database
 * that has gone silent the cancel gets no answer. That interruption goes on
 * in the background (its connection is then closed, never given back to the
 * pool), and the caller moves on at the bound.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"

/**
 * On shutdown, how long its database waits may take in all, beyond the grace
 * (the claim in flight, releasing the prefetched items and the leases of runs
 * cut off, the outcomes still unwritten, leaving the live-workers table): the
 * database may be down, or silent. Past it, three closings get at most 1 s
 * each (the outcome writer's interruption, the LISTEN connection, the pool):
 * a stop ends within the grace + 13 s (docs/operations.md).
 */
export const SHUTDOWN_DB_MS = 10_000

/** `effect`'s result, or None if it has not ended within `ms` (it is then interrupted, in the background). */
export const boundedWait = <A, E>(effect: Effect.Effect<A, E>, ms: number): Effect.Effect<Option.Option<A>, E> =>
  Effect.timeoutOption(Effect.interruptible(Effect.disconnect(effect)), Duration.millis(Math.max(0, ms)))

/** Interrupts a fiber, waiting at most `ms` for its finalizers (the rest of its interruption goes on in the background). */
export const interruptWithin = <A, E>(fiber: Fiber.Fiber<A, E>, ms: number): Effect.Effect<void> =>
  Effect.asVoid(boundedWait(Fiber.interrupt(fiber), ms))

/**
 * A budget of time shared by several waits (shutdown's database waits): each
 * waits at most its own bound and what is left of the budget.
 */
export class Budget {
  private end: number
  constructor(ms: number, private readonly now: () => number = () => performance.now()) {
    this.end = now() + ms
  }

  /**
   * Runs `effect` without charging its time to the budget (the grace: running
   * items may take it all, and the database waits after it must still get
   * theirs). Before, the grace's time ran against the budget, so a grace that
   * ran out (10 s by default, the budget's own size) left the writes after it
   * (the cut-off runs' releases, the outcomes, the live-workers row) no time.
   */
  uncharged<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> {
    return Effect.suspend(() => {
      const started = this.now()
      return Effect.ensuring(effect, Effect.sync(() => {
        this.end += this.now() - started
      }))
    })
  }

  /** What is left, in ms (0 once spent). */
  get left(): number {
    return Math.max(0, this.end - this.now())
  }

  /** `effect`'s result, or None if it has not ended within `ms` nor within what is left. */
  wait<A, E>(effect: Effect.Effect<A, E>, ms = Infinity): Effect.Effect<Option.Option<A>, E> {
    return Effect.suspend(() => boundedWait(effect, Math.min(ms, this.left)))
  }
}

/**
 * Forks a long-lived fiber of the pool (claimer, renewer, writer, heartbeat,
 * ...) in `scope`. Interrupting it, or closing the scope, does not wait for
 * its interruption to end: a statement it is in the middle of is cancelled in
 * the background, which on a silent database takes up to 5 s and would hold
 * up the shutdown and the scope's close.
 */
export const forkDetached = <A, E>(effect: Effect.Effect<A, E>, scope: Scope.Scope): Effect.Effect<Fiber.RuntimeFiber<A, E>> =>
  Effect.forkIn(Effect.disconnect(effect), scope)
