/**
 * The recorder: writes the outcomes of finished runs in batches, and gives
 * claims back (releases).
 *
 * Outcomes queue in `pending`; the writer takes whatever is ready (one
 * statement for all completions, one for all failures and one for all
 * snoozes), and while a batch
 * is being written new ones gather for the next (batching without waiting).
 * Each write is fenced by its claim's token: an outcome whose lease was lost
 * is refused ("stale") and changes nothing. On a storage error the outcomes
 * of the statement that failed are kept and written again.
 *
 * `stop(budget)` is shutdown's: the writer writes what is pending and ends. It is
 * not interrupted while it writes: that would cancel its statement, and the
 * batch it carried would be lost (those items would run again once their
 * leases ran out). The renewer keeps their leases meanwhile (`unrecorded`).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Claim, FailNext } from "../../Domain.js"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type * as QueueRepo from "../../QueueRepo.js"
import type { Finished, Outcome } from "../decide.js"
import { yieldToEventLoop } from "../eventLoop.js"
import { boundedWait, type Budget, forkDetached, interruptWithin } from "./bounded.js"
import { metrics, type Publisher } from "./events.js"
import type { Part } from "./part.js"
import type { Tallies } from "./state.js"

type Done = Finished & { readonly outcome: Extract<Outcome, { _tag: "Done" }> }
type Failed = Finished & { readonly outcome: Extract<Outcome, { _tag: "Retry" | "Dead" | "Cancel" }> }
type Snoozed = Finished & { readonly outcome: Extract<Outcome, { _tag: "Snooze" }> }

// A failure's next step, as the repository's failMany takes it.
const DEAD: FailNext = { _tag: "Dead" }
const CANCEL: FailNext = { _tag: "Cancel" }
const nextOf = (outcome: Failed["outcome"]): FailNext =>
  outcome._tag === "Retry" ? { _tag: "Retry", delay: outcome.delayMs } : outcome._tag === "Dead" ? DEAD : CANCEL

/** What the recorder needs from the pool. */
export interface RecorderDeps {
  readonly repo: QueueRepo.Service
  readonly counts: Tallies
  readonly publisher: Publisher
  /** Wakes this pool's claimer (a retry or snooze due before the next poll). */
  readonly wake: () => void
  readonly pollMs: number
  /** The pool may be idle now (called after each batch is written). */
  readonly checkIdle: () => void
  /**
   * Outcomes were written: items they held back may be due now (a waiting
   * twin of a finished keyed item, an item of a globally limited kind).
   */
  readonly wrote?: (() => void) | undefined
}

/** The most outcomes one batch writes. */
const BATCH = 5000
/** After a failed write, how long before the outcomes are written again. */
const RETRY_AFTER = "200 millis"

/** The recorder part, its writer not started yet. */
export const make = (deps: RecorderDeps): Effect.Effect<Recorder> =>
  Effect.map(Queue.sliding<void>(1), (flushes) => new Recorder(deps, flushes))

/**
 * Writes outcomes in batches and gives claims back; see the module doc.
 * Stopped once no run is left: it then writes the last outcomes.
 */
export class Recorder implements Part {
  readonly name = "recorder"
  private readonly pending: Array<Finished> = []
  private recording: ReadonlyArray<Finished> = []
  private closed = false
  private fiber: Fiber.RuntimeFiber<void, never> | undefined

  /** Built by `make`. */
  constructor(private readonly deps: RecorderDeps, private readonly flushes: Queue.Queue<void>) {}

  /** Outcomes not yet written (pending or being written). */
  get size(): number {
    return this.pending.length + this.recording.length
  }

  /** The claims of the outcomes not yet written: their leases must be kept. */
  unrecorded(): Array<Claim> {
    return [...this.pending, ...this.recording].map((o) => o.claim)
  }

  /** Queues a finished run's outcome for the next batch. */
  add(finished: Finished): void {
    this.pending.push(finished)
    if (this.pending.length === 1) Queue.unsafeOffer(this.flushes, undefined)
  }

  /** Starts the writer in `scope`. */
  start(scope: Scope.Scope): Effect.Effect<void> {
    const loop = Effect.whileLoop({
      while: () => !(this.closed && this.pending.length === 0),
      body: () =>
        Queue.take(this.flushes).pipe(
          Effect.zipRight(this.flushOnce),
          Effect.zipRight(Effect.suspend(() => (this.pending.length > 0 ? Queue.offer(this.flushes, undefined) : Effect.void))),
          Effect.zipRight(yieldToEventLoop)
        ),
      step: () => undefined
    })
    return Effect.map(forkDetached(loop, scope), (fiber) => {
      this.fiber = fiber
    })
  }

  /**
   * Writes what is pending and stops the writer, waiting at most what is left
   * of `budget` (then it is interrupted, waiting at most 1 s more for its
   * statement's cancel: the database may be silent). The outcomes left
   * unwritten (the time ran out, or the writer died of a defect) are logged:
   * their items run again once their leases run out.
   */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.gen(this, function*() {
      const fiber = this.fiber
      this.closed = true
      let unwritten = this.size
      if (fiber !== undefined) {
        if (this.size > 0) yield* Effect.logInfo(`docket: stopping: recording ${this.size} outcomes`)
        yield* Queue.offer(this.flushes, undefined)
        const flushed = yield* boundedWait(Fiber.await(fiber), budget.left)
        unwritten = this.size
        if (Option.isNone(flushed)) yield* interruptWithin(fiber, 1000)
        else if (Exit.isFailure(flushed.value)) yield* Effect.logError("docket: the outcome writer failed", flushed.value.cause)
      }
      if (unwritten > 0) {
        yield* Effect.logWarning(
          `docket: ${unwritten} outcomes not recorded at shutdown; their items run again once their leases run out`
        )
      }
    })
  }

  /** Gives claims back unrun (waiting again, attempt not counted). A storage failure is logged. */
  release(claims: ReadonlyArray<Claim>): Effect.Effect<void> {
    const { counts, publisher, repo } = this.deps
    return claims.length === 0 ? Effect.void : repo.releaseMany(claims).pipe(
      Effect.flatMap((outcomes) =>
        Effect.forEach(outcomes, (outcome, i) => {
          if (outcome === "stale") return Effect.void
          counts.released++
          return Effect.zipRight(
            publisher.publish(outcome === "absorbed" ? { _tag: "Absorbed", claim: claims[i] } : { _tag: "Released", claim: claims[i] }),
            Metric.increment(metrics.released)
          )
        }, { discard: true })
      ),
      Effect.catchAll(publisher.storageFailed("release"))
    )
  }

  private readonly flushOnce = Effect.suspend(() => {
    if (this.pending.length === 0) return Effect.void
    const batch = this.pending.splice(0, BATCH)
    this.recording = batch
    return this.write(batch).pipe(
      // In one step: the outcomes to write again go back to pending as the
      // batch stops counting as being written, so no idle check in between
      // sees neither.
      Effect.onExit((exit) =>
        Effect.sync(() => {
          this.recording = []
          if (Exit.isSuccess(exit) && exit.value.length > 0) this.pending.unshift(...exit.value)
        })
      ),
      Effect.flatMap((again) => {
        if (again.length < batch.length) this.deps.wrote?.()
        return again.length === 0 ? Effect.void : Effect.sleep(RETRY_AFTER)
      }),
      Effect.zipRight(Effect.sync(this.deps.checkIdle))
    )
  })

  // The statements (completions, failures, snoozes) run to their end side by
  // side: if one fails, the others are not cut off (a cancel could land after
  // its commit, and its items would be written twice, the second time refused
  // as stale). Returns the outcomes to write again, those of the statements
  // that failed.
  private write(batch: ReadonlyArray<Finished>): Effect.Effect<ReadonlyArray<Finished>> {
    const done: Array<Done> = []
    const failed: Array<Failed> = []
    const snoozed: Array<Snoozed> = []
    for (const o of batch) {
      const tag = o.outcome._tag
      if (tag === "Done") done.push(o as Done)
      else if (tag === "Snooze") snoozed.push(o as Snoozed)
      else failed.push(o as Failed)
    }
    const groups: Array<readonly [ReadonlyArray<Finished>, Effect.Effect<void, StorageError | InvalidInput>]> = []
    if (done.length > 0) groups.push([done, this.complete(done)])
    if (failed.length > 0) groups.push([failed, this.fail(failed)])
    if (snoozed.length > 0) groups.push([snoozed, this.snooze(snoozed)])
    return Effect.forEach(groups, ([, write]) => Effect.either(write), { concurrency: "unbounded" }).pipe(
      Effect.flatMap((results) => {
        const again = results.flatMap((r, i) => (Either.isLeft(r) ? groups[i][0] : []))
        const errors = results.flatMap((r) => (Either.isLeft(r) ? [r.left] : []))
        const { publisher } = this.deps
        if (errors.length === 0) return Effect.as(publisher.storageWorked("record outcome"), again)
        return Effect.as(Effect.forEach(errors, publisher.storageFailed("record outcome"), { discard: true }), again)
      })
    )
  }

  private complete(done: ReadonlyArray<Done>) {
    const { counts, publisher, repo } = this.deps
    return repo.completeMany(done.map((o) => (o.outcome.result === undefined ? o.claim : { claim: o.claim, result: o.outcome.result }))).pipe(
      Effect.flatMap((applied) => {
        let n = 0
        const stale: Array<Claim> = []
        for (let i = 0; i < done.length; i++) {
          if (applied[i]) {
            n++
            metrics.duration.unsafeUpdate(done[i].durationMs, [])
          } else {
            stale.push(done[i].claim)
          }
        }
        counts.completed += n
        counts.stale += stale.length
        metrics.completed.unsafeUpdate(n, [])
        const warn = Effect.forEach(stale, (claim) =>
          Effect.logWarning("docket: completion refused: the lease was lost (or the item cancelled) before it was recorded").pipe(
            Effect.annotateLogs({ kind: claim.kind, id: claim.id })
          ), { discard: true })
        const notify = !publisher.wants("Completed") ? Effect.void : Effect.forEach(done, (o, i) =>
          applied[i] ? publisher.publish({ _tag: "Completed", claim: o.claim, durationMs: o.durationMs }) : Effect.void, {
          discard: true
        })
        return Effect.zipRight(warn, notify)
      })
    )
  }

  /**
   * A transactional run's completion, committed with its handler's writes
   * (worker/transactional.ts): counted and published as a batch's are.
   */
  committed(claim: Claim, durationMs: number): Effect.Effect<void> {
    const { counts, publisher } = this.deps
    counts.completed++
    metrics.completed.unsafeUpdate(1, [])
    metrics.duration.unsafeUpdate(durationMs, [])
    this.deps.wrote?.()
    return publisher.wants("Completed") ? publisher.publish({ _tag: "Completed", claim, durationMs }) : Effect.void
  }

  /** A transactional run's completion refused by its fence: rolled back with the handler's writes. */
  refusedInTransaction(claim: Claim): Effect.Effect<void> {
    return this.refused(
      "completion (with the handler's writes, rolled back)",
      Effect.annotateLogs({ kind: claim.kind, id: claim.id, attempt: claim.attempt })
    )
  }

  // This pool wakes itself when a retried or snoozed item is due, instead of
  // waiting for the poll (the claimer may be sleeping).
  private wakeWhenDue(delayMs: number): void {
    if (delayMs < this.deps.pollMs) setTimeout(this.deps.wake, delayMs + 1).unref()
  }

  // A waiting twin with the item's key stands for it.
  private absorbed(claim: Claim): Effect.Effect<void> {
    this.deps.counts.absorbed++
    return this.deps.publisher.publish({ _tag: "Absorbed", claim })
  }

  // A write refused by its fence: the lease was taken, or the item cancelled.
  private refused(what: string, annotate: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>) {
    this.deps.counts.stale++
    return annotate(Effect.logWarning(`docket: ${what} refused: the lease was lost (or the item cancelled) before it was recorded`))
  }

  private fail(failed: ReadonlyArray<Failed>) {
    const { counts, publisher, repo } = this.deps
    return repo.failMany(failed.map((o) => ({ claim: o.claim, error: o.outcome.error, next: nextOf(o.outcome) }))).pipe(
      Effect.flatMap((outcomes) =>
        Effect.forEach(failed, ({ claim, outcome }, i) => {
          const { error } = outcome
          // The delay a retry was written with (the statement writes a dead item instead once its attempts are spent).
          const delayMs = outcome._tag === "Retry" ? outcome.delayMs : 0
          const annotate = Effect.annotateLogs({ kind: claim.kind, id: claim.id, attempt: claim.attempt })
          switch (outcomes[i]) {
            case "retried":
              counts.retried++
              this.wakeWhenDue(delayMs)
              return Effect.zipRight(
                publisher.publish({ _tag: "Retried", claim, error, delayMs }),
                Effect.zipRight(
                  Metric.increment(metrics.retried),
                  annotate(Effect.logInfo(`docket: failed, retry in ${Math.round(delayMs)} ms: ${error}`))
                )
              )
            case "dead":
              counts.dead++
              return Effect.zipRight(
                publisher.publish({ _tag: "Dead", claim, error }),
                Effect.zipRight(Metric.increment(metrics.dead), annotate(Effect.logWarning(`docket: dead: ${error}`)))
              )
            case "cancelled":
              counts.cancelled++
              return Effect.zipRight(
                publisher.publish({ _tag: "Cancelled", claim, error, source: "handler" }),
                Effect.zipRight(
                  Metric.increment(metrics.cancelled),
                  annotate(Effect.logInfo(`docket: cancelled by its handler: ${error}`))
                )
              )
            case "absorbed":
              return this.absorbed(claim)
            default:
              return this.refused("failure", annotate)
          }
        }, { discard: true })
      )
    )
  }

  private snooze(snoozed: ReadonlyArray<Snoozed>) {
    const { counts, publisher, repo } = this.deps
    return repo.snoozeMany(snoozed.map((o) => ({ claim: o.claim, delay: o.outcome.delayMs }))).pipe(
      Effect.flatMap((outcomes) =>
        Effect.forEach(snoozed, ({ claim, outcome }, i) => {
          const { delayMs, error: reason } = outcome
          const annotate = Effect.annotateLogs({ kind: claim.kind, id: claim.id, attempt: claim.attempt })
          switch (outcomes[i]) {
            case "snoozed":
              counts.snoozed++
              this.wakeWhenDue(delayMs)
              return Effect.zipRight(
                publisher.publish({ _tag: "Snoozed", claim, reason, delayMs }),
                Effect.zipRight(
                  Metric.increment(metrics.snoozed),
                  annotate(Effect.logDebug(`docket: snoozed, due in ${Math.round(delayMs)} ms: ${reason}`))
                )
              )
            case "absorbed":
              return this.absorbed(claim)
            default:
              return this.refused("snooze", annotate)
          }
        }, { discard: true })
      )
    )
  }
}
