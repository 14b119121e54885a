/**
 * The pool's wake-up signal as a part: the claimer waits on it; enqueues (in
 * this process, and on PostgreSQL in any process, through the LISTEN
 * connection), the pool's own nudges and the ticker wake it (Wakeups.ts).
 *
 * The signal, and with it the LISTEN connection, is made when the part is
 * built, in a scope of its own: the parts built after it hold its `notify`.
 * Its stop closes that scope once claiming has stopped (a notification after
 * it would wake nobody), within what is left of the shutdown's budget.
 */
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type * as Wakeups from "../../Wakeups.js"
import type { Budget } from "./bounded.js"
import type { Part } from "./part.js"

/** What the wake-up needs from the pool. */
export interface WakeupDeps {
  readonly wakeups: Wakeups.Service
  /** Listen for other processes' enqueues and cancels (`Worker.Options.listen`). */
  readonly listen: boolean | undefined
  /** Running items a cancel stopped (the cancels part's `notice`). */
  readonly onCancel: (ids: ReadonlyArray<number>) => void
}

/** The wake-up part; see the module doc. */
export class Wakeup implements Part, Wakeups.Signal {
  readonly name = "wake-up"

  /** Wakes the claimer, or its next wait. Safe from any callback. */
  readonly notify: () => void
  /** Returns at the next `notify`, or after `ms`. */
  readonly wait: (ms: number) => Effect.Effect<void>
  /** A wake-up the claimer has not taken yet (it is in a round): it looks again at once. */
  readonly pending: () => boolean

  /** Built by `make`. */
  constructor(signal: Wakeups.Signal, private readonly scope: Scope.CloseableScope) {
    // The signal's own functions (they need no `this`): nothing added on the wake-up path.
    this.notify = signal.notify
    this.wait = signal.wait
    this.pending = signal.pending
  }

  /** Nothing to start: the signal listens from the moment it is built. */
  start(): Effect.Effect<void> {
    return Effect.void
  }

  /** Closes the signal (and the LISTEN connection), within what is left of `budget`. */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.asVoid(budget.wait(Scope.close(this.scope, Exit.void)))
  }
}

/** The wake-up part, listening in a scope forked from the pool's (closed with it if the pool never stops). */
export const make = (deps: WakeupDeps): Effect.Effect<Wakeup, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    const signal = yield* deps.wakeups.signal({ listen: deps.listen, onCancel: deps.onCancel }).pipe(Scope.extend(scope))
    return new Wakeup(signal, scope)
  })
