/**
 * The pool's recurring schedules (`Worker.Options.recurring`): declared when
 * the pool starts, then one fiber that enqueues their ticks. It sleeps until
 * the earliest next tick by the database's clock (the pass that enqueued
 * reports it), wakes at it and runs one pass; every pool declaring a schedule
 * does the same, and the store's compare-and-set lets exactly one of them
 * enqueue each tick (internal/store/schedules.ts). No leader: a pool that
 * dies leaves nothing to hand over.
 *
 * It touches its schedules every 5 s, so a schedule no live pool declares is
 * shown as stopped after 15 s (../liveness.ts) and, when a pool declares it
 * again, its missed ticks are handled by its `missed` mode.
 *
 * A database failure is logged and published like every storage failure and
 * retried a second later; it never stops the pool. A schedule whose
 * declaration failed is not ticked until it is declared: ticking it would
 * enqueue every missed tick whatever its mode. On stop the fiber is simply
 * interrupted (a pass cut off rolls back; another pool, or the next start,
 * enqueues its ticks).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type * as QueueRepo from "../../QueueRepo.js"
import type { Declaration } from "../../Recurring.js"
import { HEARTBEAT_MAX_MS } from "../liveness.js"
import { type Budget, forkDetached } from "./bounded.js"
import type { Publisher } from "./events.js"
import type { Part } from "./part.js"

/** What the ticker needs from the pool. */
export interface TickerDeps {
  readonly repo: QueueRepo.Service
  readonly declarations: ReadonlyArray<Declaration>
  readonly publisher: Publisher
  /** Wakes this pool's claimer (a tick's item is due at once). */
  readonly wake: () => void
}

/** How often the schedules are touched: as a heartbeat, a third of the 15 s after which they show as stopped. */
const TOUCH_MS = HEARTBEAT_MAX_MS
/** After a failed pass or declaration. */
const RETRY_MS = 1000

/** The ticker part. */
export const make = (deps: TickerDeps): Effect.Effect<Ticker> => Effect.sync(() => new Ticker(deps))

/**
 * Declares the pool's schedules and ticks them; see the module doc. Started
 * last (after the claimer: a tick's item enqueued at start is claimed at
 * once) and stopped first: a pool that stops enqueueing ticks leaves them to
 * the others, or to its next start.
 */
export class Ticker implements Part {
  readonly name = "ticker"
  private readonly declared = new Set<string>()
  private fiber: Fiber.RuntimeFiber<never> | undefined
  private lastTouch = 0

  /** Built by `make`. */
  constructor(private readonly deps: TickerDeps) {}

  // Declares those not yet declared; a failure is logged and tried again at the next turn.
  private readonly declareRest: Effect.Effect<void> = Effect.suspend(() =>
    Effect.forEach(this.deps.declarations.filter((d) => !this.declared.has(d.name)), (d) =>
      this.deps.repo.declareSchedule(d).pipe(
        Effect.flatMap((outcome) => {
          this.declared.add(d.name)
          if (outcome.missed.length > 0) this.deps.wake()
          return outcome.declared === "kept" && outcome.missed.length === 0 ? Effect.void : Effect.logDebug(
            `docket: schedule ${d.name} declared (${outcome.declared}; ${outcome.missed.length} missed ticks enqueued)`
          )
        }),
        Effect.catchAll(this.deps.publisher.storageFailed(`declare schedule ${d.name}`))
      ), { discard: true })
  )

  // One turn: declare what is left, one pass, the touch when due; returns how long to sleep.
  private readonly turn: Effect.Effect<number> = Effect.gen(this, function*() {
    const { publisher, repo, wake } = this.deps
    yield* this.declareRest
    const names = [...this.declared]
    if (names.length === 0) return RETRY_MS
    const pass = yield* Effect.either(repo.tickSchedules(names))
    if (pass._tag === "Left") {
      yield* publisher.storageFailed("tick schedules")(pass.left)
      return RETRY_MS
    }
    if (pass.right.enqueued > 0) wake()
    const sinceTouch = performance.now() - this.lastTouch
    if (sinceTouch >= TOUCH_MS) {
      this.lastTouch = performance.now()
      yield* Effect.catchAll(repo.touchSchedules(names), publisher.storageFailed("touch schedules"))
    }
    const untilTouch = Math.max(0, TOUCH_MS - (performance.now() - this.lastTouch))
    const undeclared = names.length < this.deps.declarations.length ? RETRY_MS : Infinity
    return Math.max(0, Math.min(pass.right.nextInMs ?? Infinity, untilTouch, undeclared))
  })

  /** Declares the schedules (waited for, so they are stored once the pool has started), then ticks them in `scope`. */
  start(scope: Scope.Scope): Effect.Effect<void> {
    if (this.deps.declarations.length === 0) return Effect.void
    const loop = Effect.forever(Effect.flatMap(this.turn, (ms) => Effect.sleep(Duration.millis(ms))))
    return Effect.zipRight(this.declareRest, forkDetached(loop, scope)).pipe(
      Effect.map((fiber) => {
        this.fiber = fiber
      })
    )
  }

  /** Stops ticking, within what is left of `budget` (a pass in flight is cut off and rolls back). */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => (this.fiber === undefined ? Effect.void : Effect.asVoid(budget.wait(Fiber.interrupt(this.fiber)))))
  }
}
