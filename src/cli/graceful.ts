/**
 * Starting the worker pool so that stopping it honours the grace period:
 * running items get up to `grace` to finish; the rest are interrupted and
 * given back (their leases released, the attempt not counted).
 *
 * Two problems of `Worker.make` (src/Worker.ts, as of this writing) are
 * worked around here:
 *
 * 1. Items forked into the pool's scope. `Worker.make` forked every item's
 *    fiber with `Effect.forkIn(…, scope)` and adds its graceful `shutdown` as a
 *    finalizer of the same scope when it starts. A scope runs its finalizers
 *    in reverse order, so the interruption of the items running at that
 *    moment ran BEFORE `shutdown`: they were interrupted and given back at
 *    once, without their grace. (Being fixed in the library by forking items
 *    as daemons; the scope given here keeps it right either way: its forks go
 *    to a child scope made first, its finalizers to the parent, so `shutdown`
 *    runs while the items still run.)
 * 2. The grace is not enforced. `shutdown` runs as a finalizer, which is
 *    uninterruptible, so `Deferred.await(allDone).pipe(Effect.timeoutOption(grace))`
 *    cannot interrupt its loser: it waits until every running item finishes,
 *    however long (a fix: `Effect.interruptible` around the `Deferred.await`).
 *    Here every handler is wrapped to note the fiber it runs in, and `stop`
 *    interrupts those fibers itself when the grace has passed; the pool then
 *    gives those items back as on its own timeout. (For that, the handler's
 *    own `timeout` is applied by the wrapper, so the handler runs in the
 *    item's fiber, not in one forked by a timeout.)
 */
import { Duration, Effect, ExecutionStrategy, Exit, Fiber, Scope } from "effect"
import type * as Handler from "../Handler.js"
import { Timeout } from "../Outcome.js"
import type { QueueRepo } from "../QueueRepo.js"
import * as Worker from "../Worker.js"

const forksFirst = (scope: Scope.Scope): Effect.Effect<Scope.Scope> =>
  Effect.map(Scope.fork(scope, ExecutionStrategy.sequential), (forks) => {
    // `Effect.forkIn` registers fibers in the scope's internal `state`; without
    // it (another Effect version) the scope is used as it is.
    if (!("state" in forks)) return scope
    return Object.create(Object.getPrototypeOf(forks), {
      strategy: { value: scope.strategy },
      state: { get: () => (forks as unknown as { state: unknown }).state },
      addFinalizer: {
        value: (finalizer: unknown) =>
          (scope as unknown as { addFinalizer: (f: unknown) => unknown }).addFinalizer(finalizer)
      }
    }) as Scope.Scope
  })

/** A running pool and the way to stop it. */
export interface Pool {
  readonly worker: Worker.Service
  /** Stops claiming, lets running items finish for up to the grace, gives the rest back. */
  readonly stop: Effect.Effect<void>
  readonly graceMs: number
}

/**
 * Starts a pool; it is stopped by `stop`, or when the current scope closes.
 * The handlers must need no services.
 */
export const start = (
  options: Worker.Options<Handler.Handler<any, any, unknown, never>>
): Effect.Effect<Pool, never, QueueRepo | Scope.Scope> =>
  Effect.gen(function*() {
    const graceMs = Duration.toMillis(Duration.decode(options.grace ?? "10 seconds"))
    const running = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
    const handlers = options.handlers.map((handler): Handler.Handler<any, any, unknown, never> => ({
      ...handler,
      timeout: undefined,
      run: (payload, job) =>
        Effect.withFiberRuntime<void, unknown>((fiber) => {
          running.add(fiber)
          let run: Effect.Effect<void, unknown> = handler.run(payload, job)
          if (handler.timeout !== undefined) {
            const after = Duration.decode(handler.timeout)
            run = Effect.timeoutFail(run, { duration: after, onTimeout: () => new Timeout({ after }) })
          }
          return Effect.ensuring(run, Effect.sync(() => running.delete(fiber)))
        })
    }))
    const poolScope = yield* Scope.make()
    const worker = yield* Effect.flatMap(forksFirst(poolScope), (scope) =>
      Effect.provideService(Worker.make({ ...options, handlers }), Scope.Scope, scope)).pipe(
        Scope.extend(poolScope)
      )
    const stop = Effect.gen(function*() {
      const overdue = yield* Effect.sleep(Duration.millis(graceMs)).pipe(
        Effect.zipRight(Effect.suspend(() => Fiber.interruptAll([...running]))),
        Effect.interruptible,
        Effect.forkDaemon
      )
      yield* Scope.close(poolScope, Exit.void)
      yield* Fiber.interrupt(overdue)
    }).pipe(Effect.uninterruptible)
    yield* Effect.addFinalizer(() => stop)
    return { worker, stop, graceMs }
  })
