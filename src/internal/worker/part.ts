/**
 * One lifecycle for the pool's parts (after River's startstop.Service and
 * Oban's Plugin). A part is a piece of the pool with work of its own to start
 * and stop: the events, the global limits, the pruner, the horizon watch,
 * the cancels, the renewer, the registry, the recorder, the slots, the
 * wake-up, the claimer and the ticker. Each module builds its part the same way: `make(deps)`
 * returns an Effect of an object implementing `Part` plus its own narrow
 * methods. The values the parts share (the state, the prefetch sizing, the
 * idle waiters, the handler table) and the executor (it runs in the slots'
 * fibers, with nothing of its own to start) are built as plain values.
 *
 * `Lifecycle` starts a list of parts in order and stops the started ones in
 * reverse. The pool's list, and why its reverse is the shutdown order, is in
 * Worker.ts.
 *
 * Parts are built in dependency order, so none is named before it exists.
 * Where two need each other (a run's end frees a slot and wakes the claimer,
 * which hands items to the slots), the earlier one calls through a
 * `LateBound`: made first, filled once when every part exists.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Budget } from "./bounded.js"

/** A part of the pool: started once, stopped once (see the module doc). */
export interface Part {
  /** The part's name, for reading a start list (tests, debugging). */
  readonly name: string
  /**
   * Starts the part's work: its fibers forked (detached, bounded.ts) in
   * `scope`, the pool's, which also ends them if the pool fails to start.
   */
  readonly start: (scope: Scope.Scope) => Effect.Effect<void>
  /**
   * Stops the part. Each database wait is bounded by its own bound and by
   * what is left of `budget`, shared by the whole shutdown: on a database
   * gone silent a stop still ends. Never fails.
   */
  readonly stop: (budget: Budget) => Effect.Effect<void>
}

/** Where a lifecycle is: a start or stop out of turn is a defect. */
export type Phase = "built" | "starting" | "started" | "stopping" | "stopped"

/** Parts started in order and stopped in reverse; see the module doc. */
export class Lifecycle {
  private readonly started: Array<Part> = []
  private current: Phase = "built"

  constructor(readonly parts: ReadonlyArray<Part>) {}

  /** Where the lifecycle is. */
  get phase(): Phase {
    return this.current
  }

  /** Starts every part, in order (once). */
  start(scope: Scope.Scope): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.enter("built", "starting")
      return Effect.zipRight(
        Effect.forEach(this.parts, (part) => Effect.zipRight(part.start(scope), Effect.sync(() => this.started.push(part))), {
          discard: true
        }),
        Effect.sync(() => this.enter("starting", "started"))
      )
    })
  }

  /**
   * Stops the parts started, last started first (once), sharing `budget`;
   * also those of a start cut short (a part's start failed or was interrupted).
   */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.enter(this.current === "starting" ? "starting" : "started", "stopping")
      const parts = this.started.splice(0).reverse()
      return Effect.zipRight(
        // A stop never fails by contract; a defect in one (a bug) is logged
        // and the later ones still run: the live-workers row is removed,
        // the renewer stopped, `Stopped` published.
        Effect.forEach(
          parts,
          (part) =>
            Effect.catchAllCause(
              part.stop(budget),
              (cause) => Effect.logError(`docket: stopping the pool's ${part.name} failed`, cause)
            ),
          { discard: true }
        ),
        Effect.sync(() => this.enter("stopping", "stopped"))
      )
    })
  }

  private enter(from: Phase, to: Phase): void {
    if (this.current !== from) throw new Error(`docket: the pool's lifecycle cannot go from ${this.current} to ${to}`)
    this.current = to
  }
}

/**
 * Calls an earlier part makes on later ones (a cycle broken explicitly):
 * made before the parts, filled once when they all exist. A call before it is
 * filled, or a second fill, is a defect (thrown).
 */
export class LateBound<T extends object> {
  private value: T | undefined

  constructor(private readonly name: string) {}

  /** Fills it, once. */
  fill(value: T): void {
    if (this.value !== undefined) throw new Error(`docket: ${this.name} filled twice`)
    this.value = value
  }

  /** What it was filled with. */
  get(): T {
    if (this.value === undefined) throw new Error(`docket: ${this.name} used before the pool was built`)
    return this.value
  }
}
