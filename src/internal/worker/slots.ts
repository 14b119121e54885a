/**
 * The slots: `concurrency` long-lived fibers, each running one item at a time
 * (a fiber per item costs more than a no-op item's whole run; a slot fiber is
 * replaced only when its item's lease is lost).
 *
 * A slot takes the next startable item from the buffer, or parks until the
 * claimer (or a finishing run) dispatches. Slots run items back to back in
 * microtasks, and microtasks starve the event loop: the results of the next
 * claim and of the outcome writes (socket reads), timers and IPC would wait
 * until every slot is idle, so claiming and running would take turns instead
 * of overlapping. So the slots give the event loop a turn when it has not had
 * one for TURN_MS; all of them wait for the same turn.
 *
 * Slot fibers are daemons, not in the layer's scope: closing the scope must
 * not interrupt running items before shutdown has given them their grace.
 *
 * Stopped once the claimer is (its mode `stopping`: no item starts): the
 * prefetched items are given back, parked slots end, and running items get
 * the grace, then are interrupted (their interruption releases their leases,
 * attempt not counted).
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Option from "effect/Option"
import type { Claim } from "../../Domain.js"
import { boundedWait, type Budget } from "./bounded.js"
import type { Executor } from "./executor.js"
import { annotated, currentItem } from "./logging.js"
import type { Part } from "./part.js"
import type { PoolState, Running, Slot } from "./state.js"

/** At most this long (ms) of running items between two turns of the event loop. */
export const TURN_MS = 10

/** What the slots need from the pool. */
export interface SlotsDeps {
  readonly state: PoolState
  readonly executor: Executor
  readonly worker: string
  readonly leaseMs: number
  /** How many slots. */
  readonly concurrency: number
  /** On stop, how long running items may finish before they are interrupted. */
  readonly graceMs: number
  /** Gives claims back unrun (the prefetched items, on stop). */
  readonly release: (claims: ReadonlyArray<Claim>) => Effect.Effect<void>
}

/** The slots part, none started yet. */
export const make = (deps: SlotsDeps): Effect.Effect<Slots> => Effect.sync(() => new Slots(deps))

/** The pool's slot fibers; see the module doc. */
export class Slots implements Part {
  readonly name = "slots"
  private readonly slots = new Set<Slot>()
  private readonly parked: Array<() => void> = []
  private lastTurn = performance.now()
  private turnWaiters = new Set<() => void>()

  /** Built by `make`. */
  constructor(private readonly deps: SlotsDeps) {}

  /** Starts `concurrency` slots (daemons: see the module doc). */
  start(): Effect.Effect<void> {
    return Effect.suspend(() =>
      Effect.forEach(Array.from({ length: this.deps.concurrency }), () => this.startOne, { discard: true })
    )
  }

  /** Gives the prefetched items back, then lets running items finish for up to the grace (see the module doc). */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.gen(this, function*() {
      const { graceMs, release, state } = this.deps
      const prefetched = state.buffer.takeAll()
      const released = yield* budget.wait(release(prefetched))
      if (Option.isNone(released) && prefetched.length > 0) {
        yield* Effect.logWarning(
          `docket: ${prefetched.length} prefetched items not given back at shutdown (no answer from the database); ` +
            "they run again once their leases run out"
        )
      }
      this.dispatch() // parked slots wake, see `stopping` and end
      if (state.running.size === 0) return
      // The grace is not charged to the budget.
      const ended = yield* budget.uncharged(boundedWait(state.noneRunning, graceMs))
      if (Option.isNone(ended)) {
        yield* Effect.logWarning(`docket: ${state.running.size} items still running after the grace period; interrupting them`)
        // Their interruption releases their leases: bounded like the rest.
        yield* Effect.asVoid(budget.wait(Fiber.interruptAll(this.runningFibers())))
      }
    })
  }

  // Starts one more slot.
  private readonly startOne: Effect.Effect<void> = Effect.suspend(() => {
    const slot: Slot = { fiber: undefined, current: undefined, controller: undefined }
    this.slots.add(slot)
    return Effect.map(
      Effect.forkDaemon(
        this.loop(slot).pipe(
          Effect.locally(currentItem, slot),
          Effect.locallyWith(FiberRef.currentLoggers, HashSet.map(annotated(this.deps.worker)))
        )
      ),
      (fiber) => {
        slot.fiber = fiber
      }
    )
  })

  /** Resumes parked slots while buffered items wait (all of them when stopping). */
  readonly dispatch = (): void => {
    const { state } = this.deps
    let n = Math.min(this.parked.length, state.stopping ? this.parked.length : state.buffer.size)
    while (n-- > 0) this.parked.pop()!()
  }

  /**
   * Stops a run whose lease was lost: its slot goes with it (interrupted, so
   * the run records nothing) and a new slot takes its place unless stopping.
   */
  readonly replace = (entry: Running): Effect.Effect<void> => {
    const fiber = entry.slot.fiber
    if (fiber === undefined) return Effect.void
    this.slots.delete(entry.slot)
    return Effect.asVoid(Effect.forkDaemon(
      Effect.zipRight(Fiber.interrupt(fiber), Effect.suspend(() => (this.deps.state.stopping ? Effect.void : this.startOne)))
    ))
  }

  /** The fibers of the slots running items now. */
  runningFibers(): Array<Fiber.RuntimeFiber<void, never>> {
    return [...this.deps.state.running].flatMap((e) => (e.slot.fiber === undefined ? [] : [e.slot.fiber]))
  }

  // Checked again at the moment of parking: the fiber may have yielded
  // between finding the buffer empty and parking, while items arrived.
  private readonly park = Effect.async<void>((resume) => {
    if (this.deps.state.hasStartable()) resume(Effect.void)
    else {
      this.parked.push(() => {
        // Woken with new items after waiting (the event loop has turned
        // meanwhile): its next turn is due TURN_MS from now, not at once.
        this.lastTurn = performance.now()
        resume(Effect.void)
      })
    }
  })

  private readonly giveTurn = Effect.async<void>((resume) => {
    const waiter = () => resume(Effect.void)
    this.turnWaiters.add(waiter)
    if (this.turnWaiters.size === 1) {
      setImmediate(() => {
        this.lastTurn = performance.now()
        const waiters = this.turnWaiters
        this.turnWaiters = new Set()
        for (const w of waiters) w()
      })
    }
    return Effect.sync(() => this.turnWaiters.delete(waiter))
  })

  private next(slot: Slot): Effect.Effect<void> {
    const { executor, leaseMs, state } = this.deps
    if (performance.now() - this.lastTurn > TURN_MS) return this.giveTurn
    if (state.yieldForClaimer) {
      // The buffer ran low and the claimer was woken: one slot yields once, so
      // the claimer sends its claim now rather than when every slot has run
      // out of items (fibers take turns only when one yields).
      state.yieldForClaimer = false
      return Effect.yieldNow()
    }
    const taken = state.takeOne()
    if (taken === undefined) return this.park
    const { at, claim } = taken
    // The lease began no earlier than the claim was sent; 10% margin.
    const deadline = at + leaseMs * 0.9
    if (performance.now() > deadline) return executor.notStarted(claim)
    // Its log annotations come from slot.current (see logging.ts).
    return executor.run(state.begin(claim, slot, deadline))
  }

  private loop(slot: Slot): Effect.Effect<void> {
    const { executor, state } = this.deps
    return Effect.whileLoop({
      while: () => !state.stopping && this.slots.has(slot),
      // next() is called afresh each turn: no suspend needed.
      body: () => this.next(slot),
      step: () => undefined
    }).pipe(
      Effect.onInterrupt(() => (slot.current === undefined ? Effect.void : executor.interrupted(slot.current))),
      Effect.ensuring(Effect.sync(() => this.slots.delete(slot)))
    )
  }
}
