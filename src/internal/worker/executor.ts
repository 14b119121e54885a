/**
 * The executor: one item's run as a pipeline of small steps: decide whether it
 * can run at all (a known kind, attempts left, a payload that decodes), run
 * its handler (with the kind's timeout), decide its fate from the handler's
 * exit (a snooze within the kind's cap, or dead past it), and queue the
 * outcome with the recorder, freeing the slot.
 *
 * Interruption is handled once per slot (slots.ts), not per item: two
 * interruption regions per item cost more than a no-op handler's whole run.
 */
import type * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Metric from "effect/Metric"
import type * as Tracer from "effect/Tracer"
import * as Backoff from "../../Backoff.js"
import type { Claim } from "../../Domain.js"
import type * as Handler from "../../Handler.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { Timeout } from "../../Outcome.js"
import { decide, DONE, type Finished, type Outcome } from "../decide.js"
import { DEFAULT_MAX_SNOOZES, MAX_DELAY_MS } from "../validate.js"
import { parseTraceparent } from "../tracing.js"
import { metrics, type Publisher } from "./events.js"
import type { Encoder, HandlerTable } from "./handlers.js"
import { currentItem } from "./logging.js"
import type { Recorder } from "./recorder.js"
import type { Running, Tallies } from "./state.js"
import { runInTransaction, type TxEnd } from "./transactional.js"

/** What the executor needs from the pool. */
export interface ExecutorDeps {
  readonly worker: string
  readonly handlers: HandlerTable
  readonly counts: Tallies
  readonly publisher: Publisher
  readonly recorder: Recorder
  /** A `docket.item` span per run. */
  readonly traced: boolean
  /** A run ended (synchronous bookkeeping: the slot is free). */
  readonly finished: (entry: Running) => void
  /** The store, for transactional handlers' runs (transactional.ts). */
  readonly repo: QueueRepo.Service
  /** The pool's lease, renewed when a transactional run starts on SQLite. */
  readonly leaseMs: number
  /** Transactional runs at once (each holds a connection): `Worker.Options.transactions`. */
  readonly transactions: Effect.Semaphore
}

// A run's value as its done item keeps it. One that cannot be kept makes the
// item dead, not retried: the work has run (a retry would do it again), and
// the same code would return the same value again.
const doneWith = (encode: Encoder, value: unknown): Outcome => {
  if (value === undefined) return DONE
  const encoded = encode(value)
  return Either.isRight(encoded) ? { _tag: "Done", result: encoded.right } : { _tag: "Dead", error: encoded.left }
}

// A run's outcome from its exit without a kept value: shared by every run (no
// closures or options made per item; Effect.matchCause would make four objects).
const DONE_EXIT = Effect.succeed(DONE)
const PLAIN_EXIT = {
  onSuccess: (): Effect.Effect<Outcome<number | undefined>> => DONE_EXIT,
  onFailure: (cause: Cause.Cause<unknown>): Effect.Effect<Outcome<number | undefined>> => Effect.succeed(decide(cause))
}

// A run's outcome from its exit: its value kept (when the kind keeps results), or its failure decided.
const decideExit = (run: Effect.Effect<unknown, unknown>, encode: Encoder | undefined): Effect.Effect<Outcome<number | undefined>> =>
  encode === undefined
    ? Effect.matchCauseEffect(run, PLAIN_EXIT)
    : Effect.matchCause(run, { onSuccess: (value) => doneWith(encode, value), onFailure: decide })

// The run's span links to the enqueue's (its stored span context), so a trace
// reads request -> enqueue -> run across processes; a missing or malformed
// context links nothing.
const linkToEnqueue = (claim: Claim): ReadonlyArray<Tracer.SpanLink> | undefined => {
  const enqueued = parseTraceparent(claim.traceContext)
  return enqueued === undefined ? undefined : [{ _tag: "SpanLink", span: enqueued, attributes: { "docket.link": "enqueued" } }]
}

/** The `Job` a handler is given (a class: its `signal` getter is shared, not made per item). */
class RunJob implements Handler.Job {
  readonly id: number
  readonly kind: string
  readonly attempt: number
  readonly maxAttempts: number
  readonly key: string | null
  readonly group: string | null
  readonly priority: number
  readonly createdAt: number
  readonly runAt: number
  readonly lastError: string | null
  readonly claimedAt: number
  readonly snoozes: number
  constructor(claim: Claim, readonly worker: string, private readonly abort: () => AbortSignal) {
    this.id = claim.id
    this.kind = claim.kind
    this.attempt = claim.attempt
    this.maxAttempts = claim.maxAttempts
    this.key = claim.key
    this.group = claim.group
    this.priority = claim.priority
    this.createdAt = claim.createdAt
    this.runAt = claim.runAt
    this.lastError = claim.lastError
    this.claimedAt = claim.claimedAt
    this.snoozes = claim.snoozes
  }
  get signal(): AbortSignal {
    return this.abort()
  }
}

// A backoff's delay within what the storage accepts. A longer one (a policy
// or Schedule past about 100 years, or Duration.infinity) waits the longest
// the storage keeps: passed on, the storage would refuse the whole batch of
// failures it is written with, again at every write, and hold them all.
const backoffMs = (delay: Duration.Duration): number => {
  const ms = Duration.toMillis(delay)
  return ms >= 0 && ms <= MAX_DELAY_MS ? Math.round(ms) : MAX_DELAY_MS
}

/**
 * The executor. Not a `Part` (part.ts): it runs in the slots' fibers and has
 * nothing of its own to start or stop.
 */
export const make = (deps: ExecutorDeps): Effect.Effect<Executor> => Effect.sync(() => new Executor(deps))

/** Runs one item at a time in the calling slot fiber; see the module doc. */
export class Executor {
  /** Built by `make`. */
  constructor(private readonly deps: ExecutorDeps) {}

  /** Runs one item in its slot's fiber, up to queueing its outcome. */
  run(entry: Running): Effect.Effect<void> {
    const { claim, slot } = entry
    const { publisher, traced } = this.deps
    slot.controller = undefined
    // Most handlers never look at job.signal: make the controller on demand.
    const abort = () => (slot.controller ??= new AbortController()).signal
    const started = performance.now()
    metrics.lag.unsafeUpdate(Math.max(0, Date.now() - claim.runAt), [])
    const run = Effect.flatMap(this.decideRun(claim, abort), (outcome) => this.settle(entry, outcome, performance.now() - started))
    const observed = publisher.wants("Started") ? Effect.zipRight(publisher.publish({ _tag: "Started", claim }), run) : run
    return traced
      ? Effect.withSpan(observed, "docket.item", {
        attributes: { "docket.kind": claim.kind, "docket.id": claim.id, "docket.attempt": claim.attempt },
        links: linkToEnqueue(claim),
        kind: "consumer",
        captureStackTrace: false
      })
      : observed
  }

  /**
   * A run cut off by an interruption of its slot: a lost lease or a cancel
   * (nothing recorded), or shutdown past its grace (the item is given back,
   * this attempt not counted). A promise-based handler sees its
   * `job.signal` abort in every case.
   */
  interrupted(entry: Running): Effect.Effect<void> {
    const { counts, finished, publisher, recorder } = this.deps
    entry.slot.controller?.abort()
    finished(entry)
    if (!entry.lost) return recorder.release([entry.claim])
    if (entry.cancelled !== undefined) return this.cancelled(entry.claim, entry.cancelled, "the run was interrupted")
    counts.leaseLost++
    return Effect.zipRight(
      Effect.logWarning("docket: lease lost; the run was interrupted and nothing recorded").pipe(
        Effect.annotateLogs({ kind: entry.claim.kind, id: entry.claim.id, attempt: entry.claim.attempt })
      ),
      Effect.zipRight(publisher.publish({ _tag: "LeaseLost", claim: entry.claim }), Metric.increment(metrics.leaseLost))
    )
  }

  /**
   * A claim of an item a cancel stopped while this pool held it (its run
   * interrupted, or dropped from the buffer before it started): the cancel
   * wrote the item's end, so nothing is recorded here.
   */
  cancelled(claim: Claim, error: string, what: string): Effect.Effect<void> {
    const { counts, publisher } = this.deps
    counts.cancelled++
    return Effect.zipRight(
      Effect.logInfo(`docket: cancelled; ${what} and nothing recorded: ${error}`).pipe(
        Effect.annotateLogs({ kind: claim.kind, id: claim.id, attempt: claim.attempt })
      ),
      Effect.zipRight(publisher.publish({ _tag: "Cancelled", claim, error, source: "cancel" }), Metric.increment(metrics.cancelled))
    )
  }

  /**
   * An item whose lease may be gone before it could start (the process
   * stalled between claim and start: a long GC, a synchronous SQLite lock
   * wait): not started; it is due again when the lease ends.
   */
  notStarted(claim: Claim): Effect.Effect<void> {
    this.deps.counts.leaseLost++
    return Effect.zipRight(
      Effect.logWarning("docket: lease ran out before the item could start; not started").pipe(
        Effect.locally(currentItem, claim)
      ),
      this.deps.publisher.publish({ _tag: "LeaseLost", claim })
    )
  }

  private decideRun(claim: Claim, abort: () => AbortSignal): Effect.Effect<TxEnd> {
    const { decoders, byKind } = this.deps.handlers
    const handler = byKind.get(claim.kind)
    if (handler === undefined) {
      return Effect.succeed({ _tag: "Dead", error: `UnknownKind: no handler for kind ${claim.kind}` })
    }
    if (claim.attempt > claim.maxAttempts) {
      return Effect.succeed({
        _tag: "Dead",
        error: `LeaseExpired: attempt ${claim.attempt} of ${claim.maxAttempts}; earlier runs lost their lease ` +
          `(their worker stopped or died) before recording an outcome${claim.lastError ? `; last error: ${claim.lastError}` : ""}`
      })
    }
    const decoded = decoders.get(claim.kind)!(claim.payloadJson)
    if (decoded._tag === "Left") return Effect.succeed({ _tag: "Dead", error: `DecodeError: ${decoded.left}` })
    const job = new RunJob(claim, this.deps.worker, abort)
    // Items are forked from the pool's own fibers, which carry the context the
    // pool was built in (the handlers' services): no per-item provide needed.
    let run = Effect.suspend(() => handler.run(decoded.right, job)) as Effect.Effect<void, unknown, never>
    if (handler.timeout !== undefined) {
      const after = Duration.decode(handler.timeout)
      run = Effect.timeoutFail(run, { duration: after, onTimeout: () => new Timeout({ after }) })
    }
    const encode = this.deps.handlers.encoders.get(claim.kind)
    if (handler.transactional === true) return this.inTransaction(claim, run, encode)
    return decideExit(run, encode)
  }

  // A transactional handler's run and its completion, in one transaction
  // (transactional.ts), at most `transactions` at once in this pool.
  private inTransaction(claim: Claim, run: Effect.Effect<void, unknown>, encode: Encoder | undefined): Effect.Effect<TxEnd> {
    const { leaseMs, repo, transactions } = this.deps
    return transactions.withPermits(1)(runInTransaction(repo, claim, leaseMs, run, (r) => decideExit(r, encode)))
  }

  // A run's end: its outcome settled and queued for the next batch write,
  // its slot free. Only a retry left to the kind's backoff needs an effect (a
  // Schedule may compute the delay).
  private settle(entry: Running, outcome: TxEnd, durationMs: number): Effect.Effect<void> {
    const { claim } = entry
    switch (outcome._tag) {
      // A transactional run's end, written in its own transaction (or refused there).
      case "Committed":
        this.deps.finished(entry)
        return this.deps.recorder.committed(claim, durationMs)
      case "Stale":
        this.deps.finished(entry)
        return this.deps.recorder.refusedInTransaction(claim)
      // The handler's Cancel: final whatever attempts remain, and not dead.
      case "Done":
      case "Cancel":
      case "Dead":
        this.queue(entry, outcome, durationMs)
        return Effect.void
      // Before the attempts check: a snooze is not a failure, so the last
      // attempt may snooze too (the attempt is given back).
      case "Snooze":
        this.queue(entry, this.snoozeWithinCap(claim, outcome), durationMs)
        return Effect.void
      case "Retry": {
        const { error, delayMs } = outcome
        if (claim.attempt >= claim.maxAttempts) {
          this.queue(entry, { _tag: "Dead", error }, durationMs)
          return Effect.void
        }
        if (delayMs !== undefined) {
          this.queue(entry, { _tag: "Retry", error, delayMs }, durationMs)
          return Effect.void
        }
        const backoff = this.deps.handlers.byKind.get(claim.kind)?.backoff ?? Backoff.defaultPolicy
        return Effect.map(
          Backoff.delayFor(backoff, claim.attempt),
          (d) => this.queue(entry, { _tag: "Retry", error, delayMs: backoffMs(d) }, durationMs)
        )
      }
    }
  }

  // The kind's cap on snoozes is applied here, where the handler is known:
  // the claim carries the count its fenced write will add to.
  private snoozeWithinCap(claim: Claim, snooze: Extract<Outcome, { _tag: "Snooze" }>): Outcome {
    const cap = this.deps.handlers.maxSnoozes.get(claim.kind) ?? DEFAULT_MAX_SNOOZES
    if (claim.snoozes < cap) return snooze
    return { _tag: "Dead", error: `SnoozeLimit: snoozed ${claim.snoozes} times (maxSnoozes ${cap}); the last: ${snooze.error}` }
  }

  private queue(entry: Running, outcome: Outcome, durationMs: number): void {
    const finished: Finished = { claim: entry.claim, outcome, durationMs }
    this.deps.recorder.add(finished)
    this.deps.finished(entry)
  }
}
