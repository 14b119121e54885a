/**
 * The worker pool's lifecycle, published as events an application can
 * subscribe to (a live status line, an audit log, a test latch). The pool
 * publishes into a sliding buffer: a slow subscriber loses its oldest events,
 * and never slows the pool.
 */
import type { Claim } from "./Domain.js"

/** Counters since the pool started. */
export interface Counters {
  readonly claimed: number
  readonly completed: number
  readonly retried: number
  /** Put back by their handler (the Snooze outcome), attempt not counted. */
  readonly snoozed: number
  readonly dead: number
  /** Cancelled: by a cancel while this pool held them (their runs interrupted), or by their handler's `Cancel` outcome. */
  readonly cancelled: number
  readonly absorbed: number
  readonly released: number
  readonly leaseLost: number
  /** Finished items this pool's pruner deleted (their retention passed). */
  readonly pruned: number
  readonly stale: number
  readonly running: number
  readonly buffered: number
}

/** Something that happened in the pool, with the claim it is about. */
export type Event =
  /** Leased by this worker (may wait briefly in the prefetch buffer). */
  | { readonly _tag: "Claimed"; readonly claim: Claim }
  /** Its handler started. */
  | { readonly _tag: "Started"; readonly claim: Claim }
  /** Done: kept as done for the retention (or deleted, with a retention of 0). */
  | { readonly _tag: "Completed"; readonly claim: Claim; readonly durationMs: number }
  /** Failed; waits `delayMs` for its next attempt. */
  | { readonly _tag: "Retried"; readonly claim: Claim; readonly error: string; readonly delayMs: number }
  /** Its handler snoozed it: waits `delayMs` (attempt not counted; `claim.snoozes` is the count before this one). */
  | { readonly _tag: "Snoozed"; readonly claim: Claim; readonly reason: string; readonly delayMs: number }
  /** Failed for good; kept as dead. */
  | { readonly _tag: "Dead"; readonly claim: Claim; readonly error: string }
  /**
   * Cancelled, final: `source` "cancel" when a cancel (`QueueRepo.cancel`,
   * `docket cancel`) stopped it while this pool held it (its run interrupted,
   * or before it started; nothing recorded), "handler" when its handler
   * returned the `Cancel` outcome. `error` is its last error
   * (`Cancelled: <reason>`, `Cancel: <reason>`).
   */
  | { readonly _tag: "Cancelled"; readonly claim: Claim; readonly error: string; readonly source: "cancel" | "handler" }
  /** Failed, snoozed or released while a twin with its key waited: the twin stands for it. */
  | { readonly _tag: "Absorbed"; readonly claim: Claim }
  /** Given back unrun (shutdown, or a prefetched item that could not start soon). */
  | { readonly _tag: "Released"; readonly claim: Claim }
  /** Its lease was taken by another worker: the run was interrupted and nothing recorded. */
  | { readonly _tag: "LeaseLost"; readonly claim: Claim }
  /** A storage operation failed; the pool keeps going and retries. */
  | { readonly _tag: "StorageFailed"; readonly operation: string; readonly error: string }
  /** The pool shut down; the last event it publishes. */
  | { readonly _tag: "Stopped"; readonly counters: Counters }

/** The tags of the events. */
export type Tag = Event["_tag"]
