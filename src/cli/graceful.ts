/**
 * Starting the worker pool in a scope of its own, so the command can stop it
 * (gracefully: running items get up to `grace`, the rest are interrupted and
 * given back, their attempt not counted) before it prints its summary.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { InvalidSchedule } from "../Errors.js"
import type * as Handler from "../Handler.js"
import type { QueueRepo } from "../QueueRepo.js"
import type { Wakeups } from "../Wakeups.js"
import * as Worker from "../Worker.js"

/** A running pool and the way to stop it. */
export interface Pool {
  readonly worker: Worker.Service
  /** Stops claiming, lets running items finish for up to the grace, gives the rest back. */
  readonly stop: Effect.Effect<void>
  readonly graceMs: number
}

/** Starts a pool; it is stopped by `stop`, or when the current scope closes. The handlers need no services. */
export const start = (
  options: Worker.Options<Handler.Handler<any, any, unknown, never>>
): Effect.Effect<Pool, InvalidSchedule, QueueRepo | Wakeups | Scope.Scope> =>
  Effect.gen(function*() {
    const graceMs = Duration.toMillis(Duration.decode(options.grace ?? "10 seconds"))
    const poolScope = yield* Scope.make()
    const worker = yield* Worker.make(options).pipe(Scope.extend(poolScope))
    const stop = Scope.close(poolScope, Exit.void)
    yield* Effect.addFinalizer(() => stop)
    return { worker, stop, graceMs }
  })
