/**
 * The pool's state: the only mutable state the parts share, with the
 * operations that change it. One JS thread: every change happens inside a
 * synchronous step (an `Effect.sync` or a callback), so none is cut in half.
 *
 * Runs, not items, are tracked: a pool may claim back an item whose lease ran
 * out while it still ran it; then the stale run and the new one are apart
 * (the stale one's renewal fails and it is interrupted).
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import type { Claim } from "../../Domain.js"
import type { Counters } from "../../Events.js"
import { ClaimBuffer, type Entry } from "../buffer.js"
import * as Mode from "./mode.js"
import type { ClaimerMode } from "./mode.js"

/** A slot: one long-lived fiber running one item at a time (see slots.ts). */
export interface Slot {
  fiber: Fiber.RuntimeFiber<void, never> | undefined
  /** The run in progress, until its outcome is queued. */
  current: Running | undefined
  /** Made on demand when the handler reads `job.signal`. */
  controller: AbortController | undefined
}

/** One run of a claimed item in a slot. */
export interface Running {
  readonly claim: Claim
  /** The slot running it (its fiber is interrupted when the lease is lost). */
  readonly slot: Slot
  /** Local monotonic estimate of the lease's end (ms, performance.now based). */
  deadline: number
  /** Set when the run must stop and record nothing: another worker holds the item now, or it was cancelled. */
  lost: boolean
  /** Set with `lost` when the item was cancelled: its last error (`Cancelled: <reason>`). */
  cancelled: string | undefined
}

/** Tallies since the pool started (the running and buffered figures are read live). */
export type Tallies = { -readonly [K in Exclude<keyof Counters, "running" | "buffered">]: number }

/** The pool's shared state and the operations that change it; see the module doc. */
export class PoolState {
  readonly running = new Set<Running>()
  readonly buffer = new ClaimBuffer()
  readonly counts: Tallies = {
    claimed: 0,
    completed: 0,
    retried: 0,
    snoozed: 0,
    dead: 0,
    cancelled: 0,
    absorbed: 0,
    released: 0,
    leaseLost: 0,
    pruned: 0,
    stale: 0
  }
  /** Items started (for the prefetch's rate). */
  starts = 0
  /**
   * A turn owed to the claimer: set when a finishing slot woke it because the
   * buffer ran low, cleared by the first slot that yields for it (slots.ts).
   */
  yieldForClaimer = false
  /**
   * Batches of outcomes written so far (the claimer's `wrote`): a short claim
   * overlapped by one may have missed what it freed (the claimer then claims
   * again instead of sleeping).
   */
  writes = 0
  /** `writes` when the claimer's last claim was sent: a claim is owed while they differ. */
  writesAtClaim = 0
  private claimerMode: ClaimerMode = Mode.INITIAL

  private readonly kindRunning = new Map<string, number>()
  private allDone: Deferred.Deferred<void> | undefined
  /** The kinds' own concurrency limits in this process; `admit` is undefined when there are none. */
  readonly admit: ((claim: Claim) => boolean) | undefined

  constructor(private readonly kindLimits: ReadonlyMap<string, number>) {
    this.admit = kindLimits.size > 0 ? (claim) => this.canStart(claim) : undefined
  }

  /** The claimer's mode (mode.ts). */
  get mode(): ClaimerMode {
    return this.claimerMode
  }

  /** Changes the claimer's mode (only the claimer does); a change mode.ts does not allow is a defect (thrown). */
  setMode(to: ClaimerMode): void {
    this.claimerMode = Mode.change(this.claimerMode, to)
  }

  /** Shutdown has begun: no item starts and no claim is sent. */
  get stopping(): boolean {
    return this.claimerMode === "stopping" || this.claimerMode === "stopped"
  }

  kindCount(kind: string): number {
    return this.kindRunning.get(kind) ?? 0
  }

  /** Whether the claim's kind is below its limit here. */
  canStart(claim: Claim): boolean {
    const limit = this.kindLimits.get(claim.kind)
    return limit === undefined || this.kindCount(claim.kind) < limit
  }

  /** The kinds at their limit here (a claim leaves them out). */
  saturatedKinds(): ReadonlyArray<string> {
    const saturated: Array<string> = []
    for (const [kind, limit] of this.kindLimits) if (this.kindCount(kind) >= limit) saturated.push(kind)
    return saturated
  }

  /** The next buffered item that may start, unless stopping. */
  takeOne(): Entry | undefined {
    if (this.stopping || this.buffer.size === 0) return undefined
    const taken = this.buffer.takeOne(this.admit)
    if (taken !== undefined) this.starts++
    return taken
  }

  /**
   * The buffered items that came back before `cutoff` and that no free slot
   * will take: the free slots (`concurrency` less the runs) take the first
   * items their kinds admit, so as many of the oldest admitted ones are kept.
   * A free slot may not have taken its item yet only because it waits for
   * its turn (slots.ts: the event loop's turn, or the one a finishing slot
   * gives the claimer, whose round begins with this sweep): its item has a
   * slot, and giving it back would only claim it again.
   */
  takeHeldTooLong(cutoff: number, concurrency: number): Array<Claim> {
    const free = concurrency - this.running.size
    if (free <= 0 || this.admit === undefined) return this.buffer.takeOlderThan(cutoff, free)
    // A kind's limit, counting the items kept for it so far.
    const kept = new Map<string, number>()
    return this.buffer.takeOlderThan(cutoff, free, (claim) => {
      const limit = this.kindLimits.get(claim.kind)
      if (limit === undefined) return true
      const n = kept.get(claim.kind) ?? 0
      if (this.kindCount(claim.kind) + n >= limit) return false
      kept.set(claim.kind, n + 1)
      return true
    })
  }

  /** Whether a parked slot has something to start (or must wake to end). */
  hasStartable(): boolean {
    return this.stopping || this.buffer.some(this.admit)
  }

  /** A run begins in `slot`. */
  begin(claim: Claim, slot: Slot, deadline: number): Running {
    const entry: Running = { claim, slot, deadline, lost: false, cancelled: undefined }
    slot.current = entry
    this.running.add(entry)
    this.kindRunning.set(claim.kind, this.kindCount(claim.kind) + 1)
    return entry
  }

  /** A run ended (its outcome queued, or it was interrupted): its slot is free. */
  end(entry: Running): void {
    this.running.delete(entry)
    entry.slot.current = undefined
    const n = this.kindCount(entry.claim.kind) - 1
    if (n <= 0) this.kindRunning.delete(entry.claim.kind)
    else this.kindRunning.set(entry.claim.kind, n)
    if (this.running.size === 0 && this.allDone !== undefined) Deferred.unsafeDone(this.allDone, Exit.void)
  }

  /**
   * Nothing running or buffered, and no claim to come: the pool stops, or the
   * last claim found fewer than it asked for, no outcome was written since it
   * was sent (what that write freed is claimed next: claimer.ts, `wrote`),
   * and no wake-up waits for the claimer (`woken`: it came while the claimer
   * was busy, and the claimer looks again at once).
   */
  quiet(woken = false): boolean {
    if (this.running.size > 0 || this.buffer.size > 0) return false
    return this.stopping || (this.claimerMode !== "claiming" && this.writes === this.writesAtClaim && !woken)
  }

  /** Completes when no run is left (for shutdown). */
  readonly noneRunning: Effect.Effect<void> = Effect.suspend(() => {
    if (this.running.size === 0) return Effect.void
    // Made and set in one step: a run ending in between would find no latch.
    const done = Deferred.unsafeMake<void>(FiberId.none)
    this.allDone = done
    return Deferred.await(done)
  })

  /** The counters as users see them. */
  counters(): Counters {
    return { ...this.counts, running: this.running.size, buffered: this.buffer.size }
  }
}

/** Who waits for the pool to be idle (`whenIdle`), released when `isIdle` holds at a check. */
export class IdleWaiters {
  private waiters: Array<Deferred.Deferred<void>> = []
  constructor(private readonly isIdle: () => boolean) {}

  /** Resolves the waiters if the pool is idle now. */
  readonly check = (): void => {
    if (this.waiters.length === 0 || !this.isIdle()) return
    const waiters = this.waiters
    this.waiters = []
    for (const d of waiters) Deferred.unsafeDone(d, Exit.void)
  }

  /** Waits until idle; `nudge` runs once the waiter is registered (to make the pool look). */
  wait(nudge: Effect.Effect<void>): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.isIdle()) return Effect.void
      return Effect.flatMap(Deferred.make<void>(), (d) => {
        this.waiters.push(d)
        return Effect.zipRight(nudge, Deferred.await(d))
      })
    })
  }
}
