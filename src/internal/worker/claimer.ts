/**
 * The claimer: one fiber that keeps the buffer stocked. Each round it gives
 * back prefetched items that waited too long for a slot, sizes the prefetch,
 * claims as many items as there is room for (free slots plus the prefetch),
 * hands them to the slots, and when a claim finds fewer items than it asked
 * for sleeps until a wake-up, the next due time, or the poll. Its mode
 * (mode.ts) is kept in the pool's state; only the claimer changes it.
 *
 * Stopped first of the parts that touch items (after the ticker): no claim is
 * sent and no item starts after its stop begins, and the claim in flight ends
 * first (one cut off mid-statement could lease items nobody holds).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Claim } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"
import type * as Wakeups from "../../Wakeups.js"
import { MAX_CLAIM_LIMIT } from "../validate.js"
import { yieldToEventLoop } from "../eventLoop.js"
import { type Budget, forkDetached, interruptWithin } from "./bounded.js"
import { metrics, type Publisher } from "./events.js"
import * as Mode from "./mode.js"
import type { Part } from "./part.js"
import * as Prefetch from "./prefetch.js"
import type { PoolState } from "./state.js"

/** What the claimer needs from the pool. */
export interface ClaimerDeps {
  readonly repo: QueueRepo.Service
  readonly state: PoolState
  readonly prefetch: Prefetch.Prefetch
  readonly wakeup: Wakeups.Signal
  readonly publisher: Publisher
  readonly worker: string
  readonly concurrency: number
  readonly leaseMs: number
  readonly pollMs: number
  /** How long a prefetched item may wait for a slot. */
  readonly holdMs: number
  /** The kinds with a handler here. */
  readonly handlerKinds: ReadonlyArray<string>
  /** Claim only those kinds (else every kind, unless some are at their limit here). */
  readonly handledOnly: boolean
  /** The handlers' budgets by kind, for items enqueued without one. */
  readonly maxAttemptsByKind: ReadonlyMap<string, number>
  /** The pool makes a span per run (which links to the item's stored trace context): claims read it only then. */
  readonly traced?: boolean | undefined
  /** Gives claims back unrun. */
  readonly release: (claims: ReadonlyArray<Claim>) => Effect.Effect<void>
  /** Resumes parked slots. */
  readonly dispatch: () => void
  /** The monotonic clock (ms): performance.now, unless a test gives its own. */
  readonly now?: (() => number) | undefined
  /** The pool may be idle now. */
  readonly checkIdle: () => void
}

/** After a failed claim, how long before the next. */
const CLAIM_RETRY = "500 millis"

/**
 * On stop, how long the claim in flight may take to end (from the shutdown's
 * budget; past it the claim is interrupted, and the items it may have leased
 * run again once their leases run out).
 */
export const CLAIM_END_MS = 5000

/** The claimer part, not started yet. */
export const make = (deps: ClaimerDeps): Effect.Effect<Claimer> => Effect.sync(() => new Claimer(deps))

/** Keeps the buffer stocked; see the module doc. */
export class Claimer implements Part {
  readonly name = "claimer"
  // Set when a finishing slot woke the claimer, until its next round starts:
  // one wake-up per round is enough.
  private woken = false
  private fiber: Fiber.RuntimeFiber<void> | undefined
  // From a claim's send until its result is in the pool's state: a write
  // meanwhile is seen by the round itself (`wrote`).
  private inFlight = false

  /** Built by `make`. */
  constructor(private readonly deps: ClaimerDeps) {}

  /** Forks `run` in `scope`. */
  start(scope: Scope.Scope): Effect.Effect<void> {
    return Effect.map(forkDetached(this.run, scope), (fiber) => {
      this.fiber = fiber
    })
  }

  /**
   * Stops claiming: the mode goes to `stopping` (no item starts now), the
   * claim in flight gets up to CLAIM_END_MS of `budget` to end (then it is
   * interrupted), and the mode goes to `stopped`.
   */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.gen(this, function*() {
      const { state, wakeup } = this.deps
      state.setMode("stopping")
      wakeup.notify() // the claimer sees `stopping` at its next turn
      const fiber = this.fiber
      if (fiber !== undefined) {
        const ended = yield* budget.wait(Fiber.await(fiber), CLAIM_END_MS)
        if (Option.isNone(ended)) yield* interruptWithin(fiber, budget.left)
      }
      state.setMode("stopped")
    })
  }

  /** Claims round after round until the pool stops. */
  readonly run: Effect.Effect<void> = Effect.whileLoop({
    while: () => !this.deps.state.stopping,
    body: () => this.round,
    step: () => undefined
  })

  /**
   * A batch of outcomes was written (the recorder's `wrote`). It may have
   * freed what held items back (an ordered group's next item behind a
   * finished one, a keyed item's waiting twin, a kind's place): one rule, a
   * short claim (it found fewer than it asked for: `drained` or `empty`)
   * overlapped by a write claims again rather than sleep until the poll.
   * While a claim is in flight the write is counted (`state.writes`), and the
   * round claims again if its claim comes back short (its snapshot may
   * predate the write); once a short claim is back, the write wakes the
   * claimer. A full claim runs again as slots free anyway (waking it after
   * every write cost W2 a claim per batch written). Short claims with items
   * are the grouped kinds' usual case since they are prefetched (migration
   * 0020): their buffered items keep the claimer from being woken as slots
   * free, and without this an ordered group's next item waited for the poll
   * (W8's small groups: 2-3 s a run, one run in two). W2 pays nothing
   * measurable (its claims are full until the drain's tail): 10,000 jobs,
   * 3 runs a side, load 6-7, claims per drain 11-14 / 12-13 (1 process, PG)
   * and 32-42 / 26-38 (2 processes, SQLite) after / before, throughput
   * within the runs' noise (ratios 0.83-1.57 across the four cells).
   */
  readonly wrote = (): void => {
    const { state, wakeup } = this.deps
    state.writes++
    if (!this.inFlight && (state.mode === "empty" || state.mode === "drained")) wakeup.notify()
  }

  /**
   * A slot freed: the prefetch resumes, and the claimer only needs a turn
   * when the buffer ran low (one wake-up per round is enough; one slot yields
   * so the claim goes out now).
   */
  readonly slotFreed = (): void => {
    const { prefetch, state, wakeup } = this.deps
    prefetch.resume()
    if (state.buffer.size <= prefetch.lowWater() && !this.woken) {
      wakeup.notify()
      this.woken = true
      state.yieldForClaimer = true
    }
  }

  // Every kind (undefined), or the kinds to claim: those handled here (when
  // claiming only those) less the kinds at their limit in this process.
  private kinds(): ReadonlyArray<string> | undefined {
    const saturated = this.deps.state.saturatedKinds()
    if (!this.deps.handledOnly && saturated.length === 0) return undefined
    return this.deps.handlerKinds.filter((k) => !saturated.includes(k))
  }

  private now(): number {
    return this.deps.now === undefined ? performance.now() : this.deps.now()
  }

  // Gives back the items that waited the hold in the buffer with no slot to
  // go to (state.ts, `takeHeldTooLong`): the items free slots take next stay.
  private readonly sweep = Effect.suspend(() => {
    const { concurrency, holdMs, prefetch, release, state } = this.deps
    if (state.buffer.size === 0) return Effect.void
    const cutoff = this.now() - holdMs
    const old = state.takeHeldTooLong(cutoff, concurrency)
    // Old items kept for free slots: wake any parked one (it was woken when
    // they came; should it have missed that, they would otherwise wait for
    // the next claim or run's end, where before they were given back).
    if ((state.buffer.oldest() ?? Infinity) < cutoff) this.deps.dispatch()
    if (old.length === 0) return Effect.void
    prefetch.pause()
    return release(old)
  })

  private readonly round: Effect.Effect<void> = Effect.gen(this, function*() {
    const { concurrency, holdMs, leaseMs, maxAttemptsByKind, pollMs, prefetch, publisher, repo, state, traced, wakeup, worker } =
      this.deps
    this.woken = false
    yield* this.sweep
    prefetch.adapt(this.now(), state.starts)
    const starving = state.running.size < concurrency && state.buffer.size === 0
    if (starving && state.mode === "claiming" && !prefetch.paused) prefetch.grow()
    const room = Prefetch.room({
      concurrency,
      prefetch: prefetch.current,
      paused: prefetch.paused,
      running: state.running.size,
      buffered: state.buffer.size,
      maxClaim: MAX_CLAIM_LIMIT
    })
    // Full: wait until a slot frees (its finish wakes us), or sweep the buffer.
    if (!Prefetch.shouldClaim(room, starving, state.buffer.size, prefetch.current)) {
      return yield* wakeup.wait(Math.min(pollMs, holdMs))
    }
    const kinds = this.kinds()
    if (kinds !== undefined && kinds.length === 0) return yield* wakeup.wait(pollMs)
    const sentAt = this.now()
    const writesAtSend = state.writes
    state.writesAtClaim = writesAtSend
    this.inFlight = true
    // Items of globally limited kinds only for free slots: prefetched, they
    // would hold the kind's places (or have used its starts) without running.
    const limitedMax = Math.max(0, Math.min(room, concurrency - state.running.size - state.buffer.size))
    const lease = Duration.millis(leaseMs)
    // The items' stored trace contexts only for a pool that makes spans (they link to them).
    const traceContext = traced ?? true
    const claimed = yield* repo.claim({ worker, limit: room, lease, kinds, maxAttemptsByKind, limitedMax, traceContext }).pipe(
      Effect.tap(() => publisher.storageWorked("claim")),
      Effect.asSome,
      Effect.catchAll((error) => Effect.as(publisher.storageFailed("claim")(error), Option.none<ReadonlyArray<Claim>>())),
      Effect.ensuring(Effect.sync(() => {
        this.inFlight = false
      }))
    )
    // A failed claim is tried again after a moment, not after the next due
    // time or the poll: the read of the next due time would likely fail as
    // well (a lock, a statement timeout, a restart) and leave the pool
    // asleep for a whole poll.
    if (Option.isNone(claimed)) return yield* Effect.sleep(CLAIM_RETRY)
    const claims = claimed.value
    // A claim that ends once shutdown began leaves the mode as it is (mode.ts).
    if (!state.stopping) state.setMode(Mode.afterClaim(claims.length, room))
    if (claims.length > 0) {
      // The lease counts from the send, the hold from now (buffer.ts, `Entry`).
      const since = this.now()
      for (const claim of claims) state.buffer.push(claim, sentAt, since)
      state.counts.claimed += claims.length
      yield* Metric.incrementBy(metrics.claimed, claims.length)
      if (publisher.wants("Claimed")) {
        yield* Effect.forEach(claims, (claim) => publisher.publish({ _tag: "Claimed", claim }), { discard: true })
      }
      this.deps.dispatch()
    }
    yield* yieldToEventLoop
    // Once stopping, no wait for the next due time: the claim's 5 s at
    // shutdown are not spent on a read whose answer nobody uses.
    if (claims.length === room || state.stopping) return
    // A short claim overlapped by a write (`wrote`): one more claim, not a sleep until the poll.
    if (state.writes !== writesAtSend) return
    // Drained for now: sleep until a wake-up, the next due time, or the poll.
    this.deps.checkIdle()
    // A failed read of the next due time: claim again after a moment (as after a failed claim).
    const next = yield* repo.nextDueIn.pipe(Effect.orElseSucceed(() => Option.some(Duration.decode(CLAIM_RETRY))))
    const nextMs = Option.match(next, { onNone: () => pollMs, onSome: Duration.toMillis })
    yield* wakeup.wait(nextMs > 0 ? Math.min(pollMs, nextMs + 5) : pollMs)
  })
}

