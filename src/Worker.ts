/**
 * The worker pool: claims due items in batches, runs each under its kind's
 * handler, keeps their leases alive, and records outcomes.
 *
 * - Concurrency: at most `concurrency` handlers run at once (and at most a
 *   kind's own `concurrency` of that kind). The pool claims as many items as
 *   it has free slots plus a bounded prefetch, so the next batch is ready when
 *   slots free up; a prefetched item that cannot start within `prefetchHold`
 *   is released (waiting again, attempt not counted) for other workers.
 * - Leases: one renewal fiber extends the leases of every running item in one
 *   fenced statement every third of the lease. A renewal that finds a lease
 *   taken by another worker (or that cannot reach the database until the
 *   lease surely ran out) interrupts that run and records nothing.
 * - Outcomes: recorded in batches (one statement for all completions and one
 *   for all failures ready at that moment), each fenced by its claim token.
 * - Wake-ups: PostgreSQL NOTIFY from enqueues in any process, an in-process
 *   signal from enqueues through this process's `QueueRepo`, a timer at the
 *   next due time; the poll is only the fallback.
 * - Shutdown (when the layer's scope closes): stop claiming, release the
 *   prefetched items, let running items finish for up to `grace`, then
 *   interrupt them and release their leases (attempt not counted), then
 *   write the outcomes not yet written (up to 10 s more: the statement in
 *   flight is waited for, never cancelled).
 */
import {
  identity,
  Context,
  Deferred,
  Duration,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberRef,
  FiberRefs,
  HashMap,
  HashSet,
  Layer,
  Logger,
  Metric,
  MetricBoundaries,
  Option,
  PubSub,
  Queue,
  Scope,
  Schedule,
  Schema
} from "effect"
import { hostname } from "node:os"
import * as Backoff from "./Backoff.js"
import type { InvalidInput, StorageError } from "./Errors.js"
import type { Counters, Event } from "./Events.js"

export type { Counters } from "./Events.js"
import * as Handler from "./Handler.js"
import { ClaimBuffer } from "./internal/buffer.js"
import { defaultTracer } from "./internal/tracing.js"
import { MAX_CLAIM_LIMIT } from "./internal/validate.js"
import { type Decision, decide, Timeout } from "./Outcome.js"
import type { Claim, FailNext } from "./Domain.js"
import { QueueRepo } from "./QueueRepo.js"
import * as Wakeups from "./Wakeups.js"

export interface Options<H extends Handler.Any = Handler.Any> {
  /** The handlers, one per kind. */
  readonly handlers: ReadonlyArray<H>
  /** Handlers running at once in this process (default 10). */
  readonly concurrency?: number | undefined
  /**
   * At most this many items claimed ahead of free slots (default 8000). The
   * pool adapts within it: it prefetches about what it starts in half of
   * `prefetchHold`, and never fewer than `concurrency` (if the bound allows),
   * so only a pool that starts thousands of items a second reaches the bound,
   * and it holds about half a second of work. It claims again when the
   * buffer is half empty, so a fast pool keeps a claim in flight while it
   * runs the other half. Larger claims cost less per item (a claim statement
   * has a fixed cost of a few ms): draining 20,000 no-op jobs on PostgreSQL
   * with bounds of 1000 / 2000 / 4000 / 8000 ran at about 37k / 42k / 48k / 52k
   * jobs/s (docs/benchmarks.md).
   */
  readonly prefetch?: number | undefined
  /** How long a prefetched item may wait for a slot before it is released (default 1 s). */
  readonly prefetchHold?: Duration.DurationInput | undefined
  /** Lease length; renewed every third of it while the handler runs (default 30 s). */
  readonly lease?: Duration.DurationInput | undefined
  /** Fallback poll when no wake-up arrives (default 2 s). */
  readonly poll?: Duration.DurationInput | undefined
  /** On shutdown, how long running items may finish before they are interrupted (default 10 s). */
  readonly grace?: Duration.DurationInput | undefined
  /** This worker's name (default host:pid:random). */
  readonly worker?: string | undefined
  /**
   * "all" (default): claim every kind; an item of a kind with no handler is dead
   * at once. "handled": claim only kinds with a handler here (for several
   * applications sharing one queue, each with its own kinds).
   */
  readonly claimKinds?: "all" | "handled" | undefined
  /**
   * A `docket.item` span per run (default: only when the application installed
   * a tracer other than Effect's built-in one, e.g. @effect/opentelemetry).
   */
  readonly spans?: boolean | undefined
  /** Listen for PostgreSQL notifications (default true; off behind a transaction-pooling PgBouncer). */
  readonly listen?: boolean | undefined
}

/** The running pool. */
export interface Service {
  /** This worker's name, as recorded in `claimed_by`. */
  readonly id: string
  /** A subscription to the pool's events, for the subscription's scope. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Event>, never, Scope.Scope>
  readonly counters: Effect.Effect<Counters>
  /**
   * Waits until this pool is idle: nothing running, buffered or waiting to be
   * recorded here, and its last claim found nothing due.
   */
  readonly whenIdle: Effect.Effect<void>
  /** Makes the pool look for due items now. */
  readonly wake: Effect.Effect<void>
}

export class Worker extends Context.Tag("docket/Worker")<Worker, Service>() {}

/** A worker name: host:pid plus a short random part (two processes never share one). */
export const defaultName = (): string => `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`

const metrics = {
  claimed: Metric.counter("docket_items_claimed", { description: "Items claimed by this worker" }),
  completed: Metric.counter("docket_items_completed", { description: "Items done" }),
  retried: Metric.counter("docket_items_retried", { description: "Items failed and scheduled again" }),
  dead: Metric.counter("docket_items_dead", { description: "Items kept as dead" }),
  released: Metric.counter("docket_items_released", { description: "Items given back unrun" }),
  leaseLost: Metric.counter("docket_items_lease_lost", { description: "Runs interrupted because the lease was lost" }),
  duration: Metric.histogram(
    "docket_item_duration_ms",
    MetricBoundaries.exponential({ start: 1, factor: 2, count: 18 }),
    "Handler run time in milliseconds"
  ),
  lag: Metric.histogram(
    "docket_item_lag_ms",
    MetricBoundaries.exponential({ start: 1, factor: 2, count: 22 }),
    "Time from due to start, in milliseconds"
  )
}

interface Running {
  readonly claim: Claim
  /** The slot running it (its fiber is interrupted when the lease is lost). */
  readonly slot: {
    readonly fiber: Fiber.RuntimeFiber<void, never> | undefined
    current: Running | undefined
    controller: AbortController | undefined
  }
  /** Local monotonic estimate of the lease's end (ms, performance.now based). */
  deadline: number
  lost: boolean
}

type Outcome =
  | { readonly _tag: "Done"; readonly claim: Claim; readonly durationMs: number }
  | { readonly _tag: "Fail"; readonly claim: Claim; readonly error: string; readonly next: FailNext; readonly delayMs: number }

const DONE: Decision = { _tag: "Done" }

/** The `Job` a handler is given (a class: its `signal` getter is shared, not made per item). */
class RunJob implements Handler.Job {
  readonly id: number
  readonly kind: string
  readonly attempt: number
  readonly maxAttempts: number
  readonly key: string | null
  readonly priority: number
  readonly createdAt: number
  readonly lastError: string | null
  constructor(claim: Claim, readonly worker: string, private readonly abort: () => AbortSignal) {
    this.id = claim.id
    this.kind = claim.kind
    this.attempt = claim.attempt
    this.maxAttempts = claim.maxAttempts
    this.key = claim.key
    this.priority = claim.priority
    this.createdAt = claim.createdAt
    this.lastError = claim.lastError
  }
  get signal(): AbortSignal {
    return this.abort()
  }
}

/**
 * For log annotations: in a slot fiber, its slot (whose running item changes);
 * in a fiber forked while an item runs, that item (fixed at the fork, so a
 * fiber that outlives its item keeps it). Nothing is set per item.
 */
interface SlotRef {
  readonly current: { readonly claim: Claim } | undefined
}
const currentItem = FiberRef.unsafeMake<SlotRef | Claim | undefined>(undefined, {
  fork: (value) => (value !== undefined && "current" in value ? value.current?.claim : value),
  // A joined child's value must not replace the slot (by default a join
  // copies the child's fiber refs into the parent): the slot's next item
  // would log as the joined child's item.
  join: (parent) => parent
})
const itemOf = (value: SlotRef | Claim | undefined): Claim | undefined =>
  value !== undefined && "current" in value ? value.current?.claim : value

// See giveTurn: at most this long (ms) of running items between two turns of the event loop.
const TURN_MS = 10
/** On shutdown, how long the outcomes still unwritten may take to be written (the database may be down). */
const OUTCOME_GRACE_MS = 10_000

const millis = (input: Duration.DurationInput) => Duration.toMillis(Duration.decode(input))

// better-sqlite3 is synchronous: a pool draining a SQLite backlog would never
// give Node's event loop a turn (timers, signals, IPC, lease renewals all
// stall). A macrotask once per batch keeps them running at little cost.
const yieldToEventLoop = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

const checkPositiveInt = (name: string, value: number, min: number) => {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new Error(`Docket worker: ${name} must be an integer >= ${min} (got ${value})`)
  }
  return value
}

/**
 * Starts a pool in the current scope; closing the scope shuts it down
 * gracefully. Needs the `QueueRepo` and whatever the handlers need.
 */
export const make = <H extends Handler.Any>(
  options: Options<H>
): Effect.Effect<Service, never, QueueRepo | Wakeups.Wakeups | Scope.Scope | Handler.Requirements<H>> =>
  Effect.gen(function*() {
    const repo = yield* QueueRepo
    const id = options.worker ?? defaultName()
    const concurrency = checkPositiveInt("concurrency", options.concurrency ?? 10, 1)
    const prefetch = checkPositiveInt("prefetch", options.prefetch ?? 8000, 0)
    const leaseMs = millis(options.lease ?? "30 seconds")
    const pollMs = millis(options.poll ?? "2 seconds")
    const graceMs = millis(options.grace ?? "10 seconds")
    const holdMs = Math.min(millis(options.prefetchHold ?? "1 second"), leaseMs / 3)
    const renewEveryMs = Math.max(10, Math.floor(leaseMs / 3))
    // Logs written while an item runs carry its kind, id and attempt and this
    // worker's name. Setting the fiber's log annotations per item (a HashMap
    // built, hashed and compared on every set) cost a quarter of a no-op item's
    // run; instead each slot fiber's loggers are wrapped once and find the
    // item through currentItem (fibers the handler forks keep their item, like
    // annotations). Annotations the handler sets itself win over these.
    const annotated = (logger: Logger.Logger<unknown, unknown>): Logger.Logger<unknown, unknown> =>
      Logger.make((options) => {
        const claim = itemOf(FiberRefs.getOrDefault(options.context, currentItem))
        if (claim === undefined) return logger.log(options)
        let annotations = options.annotations
        if (!HashMap.has(annotations, "kind")) annotations = HashMap.set(annotations, "kind", claim.kind)
        if (!HashMap.has(annotations, "id")) annotations = HashMap.set(annotations, "id", claim.id)
        if (!HashMap.has(annotations, "attempt")) annotations = HashMap.set(annotations, "attempt", claim.attempt)
        if (!HashMap.has(annotations, "worker")) annotations = HashMap.set(annotations, "worker", id)
        return logger.log({ ...options, annotations })
      })
    const handlers = new Map<string, Handler.Any>()
    // Handlers given here, and those provided as services by Handler.layer.
    const provided = Handler.registered(yield* Effect.context<never>())
    for (const handler of [...options.handlers, ...provided]) {
      if (handlers.has(handler.kind)) throw new Error(`Docket worker: two handlers for kind ${handler.kind}`)
      handlers.set(handler.kind, handler)
    }
    // JSON.parse, then the schema (half the cost of Schema.parseJson's one transformation).
    const decoders = new Map(
      [...handlers].map(([kind, h]) => {
        const decode = Schema.decodeUnknownEither(h.payload)
        return [kind, (json: string): Either.Either<unknown, string> => {
          let value: unknown
          try {
            value = JSON.parse(json)
          } catch (e) {
            return Either.left(`the stored payload is not JSON: ${e instanceof Error ? e.message : String(e)}`)
          }
          return Either.mapLeft(decode(value), (error) => error.message)
        }] as const
      })
    )
    const kindLimits = new Map(
      [...handlers].flatMap(([kind, h]) => (h.concurrency === undefined ? [] : [[kind, h.concurrency] as const]))
    )
    const claimHandledOnly = options.claimKinds === "handled"
    // A span per item costs as much as the rest of a no-op item's run; it is
    // made only when the application installed a tracer (e.g. OpenTelemetry).
    const traced = options.spans ?? ((yield* Effect.tracer) !== defaultTracer)

    // --- state (one JS thread: plain mutable state, changed only inside Effect.sync) ---
    // Runs, not items: a pool may claim back an item whose lease ran out while
    // it still ran it; then the stale run and the new one are tracked apart
    // (the stale one's renewal fails and it is interrupted).
    const running = new Set<Running>()
    const kindRunning = new Map<string, number>()
    const buffer = new ClaimBuffer()
    const pending: Array<Outcome> = []
    let recording: ReadonlyArray<Outcome> = []
    let stopping = false
    // Set by shutdown once no item runs any more: the flusher writes what is
    // pending and ends.
    let outcomesClosed = false
    let starts = 0
    // Set when prefetched items had to be released because no slot freed in
    // time: prefetching more would only lease items other workers could run.
    // Cleared when a slot frees.
    let prefetchPaused = false
    let lastClaimDrained = false
    // Set when a finishing slot woke the claimer, until the claimer's next round
    // starts (one wake-up per round is enough); yieldForClaimer until one slot
    // has yielded for it.
    let claimerWanted = false
    let yieldForClaimer = false
    const counts = { claimed: 0, completed: 0, retried: 0, dead: 0, absorbed: 0, released: 0, leaseLost: 0, stale: 0 }
    let idleWaiters: Array<Deferred.Deferred<void>> = []
    let allDone: Deferred.Deferred<void> | undefined

    const events = yield* PubSub.sliding<Event>(4096)
    // Events are made only while someone listens: a pool with no subscriber
    // spends nothing on them.
    let subscribers = 0
    const publish = (event: Event) => (subscribers > 0 ? PubSub.publish(events, event) : Effect.void)
    const metricsLag = (ms: number) => metrics.lag.unsafeUpdate(ms, [])
    // Wakes the claimer: enqueues here and (PostgreSQL) anywhere, and the pool's own nudges.
    // Its LISTEN connection (in a scope of its own) is closed by shutdown once claiming has stopped.
    const wakeupScope = yield* Scope.make()
    const wakeups = yield* (yield* Wakeups.Wakeups).signal({ listen: options.listen }).pipe(Scope.extend(wakeupScope))
    const flushes = yield* Queue.sliding<void>(1)
    const wake = Effect.sync(wakeups.notify)

    const isIdle = () => lastClaimDrained && running.size === 0 && buffer.size === 0 && pending.length === 0
    const checkIdleSync = () => {
      if (idleWaiters.length === 0 || !isIdle()) return
      const waiters = idleWaiters
      idleWaiters = []
      for (const d of waiters) Deferred.unsafeDone(d, Exit.void)
    }
    const checkIdle = Effect.sync(checkIdleSync)

    const storageFailed = (operation: string) => (error: StorageError | InvalidInput) =>
      Effect.zipRight(
        Effect.logWarning(`docket: ${operation} failed`, error.message),
        publish({ _tag: "StorageFailed", operation, error: error.message })
      )

    // --- running an item ---
    const kindCount = (kind: string) => kindRunning.get(kind) ?? 0

    const decideRun = (claim: Claim, abort: () => AbortSignal): Effect.Effect<Decision> => {
      const handler = handlers.get(claim.kind)
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
      if (decoded._tag === "Left") {
        return Effect.succeed({ _tag: "Dead", error: `DecodeError: ${decoded.left}` })
      }
      const job = new RunJob(claim, id, abort)
      // Items are forked from the pool's own fibers, which carry the context the
      // pool was built in (the handlers' services): no per-item provide needed.
      let run = Effect.suspend(() => handler.run(decoded.right, job)) as Effect.Effect<void, unknown, never>
      if (handler.timeout !== undefined) {
        const after = Duration.decode(handler.timeout)
        run = Effect.timeoutFail(run, { duration: after, onTimeout: () => new Timeout({ after }) })
      }
      return Effect.matchCause(run, { onSuccess: () => DONE, onFailure: decide })
    }

    // Bookkeeping when a run ends (synchronous: it cannot be cut in half by an
    // interruption). The claimer only needs a turn when the buffer ran low.
    const finishSync = (entry: Running) => {
      running.delete(entry)
      entry.slot.current = undefined
      prefetchPaused = false
      const n = kindCount(entry.claim.kind) - 1
      if (n <= 0) kindRunning.delete(entry.claim.kind)
      else kindRunning.set(entry.claim.kind, n)
      if (running.size === 0 && allDone !== undefined) Deferred.unsafeDone(allDone, Exit.void)
      dispatchSync()
      if (buffer.size <= lowWater() && !claimerWanted) {
        wakeups.notify()
        claimerWanted = true
        yieldForClaimer = true
      }
      checkIdleSync()
    }

    const queueOutcome = (entry: Running, outcome: Outcome) => {
      pending.push(outcome)
      if (pending.length === 1) Queue.unsafeOffer(flushes, undefined)
      finishSync(entry)
    }

    // A run's end: its outcome queued for the next batch write, its slot free.
    // Only a failure that retries with the kind's backoff needs an effect (a
    // Schedule may compute the delay).
    const settle = (entry: Running, decision: Decision, durationMs: number): Effect.Effect<void> => {
      const { claim } = entry
      if (decision._tag === "Done") {
        queueOutcome(entry, { _tag: "Done", claim, durationMs })
        return Effect.void
      }
      if (decision._tag === "Dead" || claim.attempt >= claim.maxAttempts) {
        queueOutcome(entry, { _tag: "Fail", claim, error: decision.error, next: { _tag: "Dead" }, delayMs: 0 })
        return Effect.void
      }
      const retry = (d: Duration.Duration) =>
        queueOutcome(entry, { _tag: "Fail", claim, error: decision.error, next: { _tag: "Retry", delay: d }, delayMs: Duration.toMillis(d) })
      if (Option.isSome(decision.delay)) {
        retry(decision.delay.value)
        return Effect.void
      }
      return Effect.map(Backoff.delayFor(handlers.get(claim.kind)?.backoff ?? Backoff.defaultPolicy, claim.attempt), retry)
    }

    // What happens to a run cut off by an interruption of its slot: a lost
    // lease (nothing recorded), or shutdown past its grace (the item is given
    // back, this attempt not counted).
    const interrupted = (entry: Running): Effect.Effect<void> => {
      entry.slot.controller?.abort()
      finishSync(entry)
      if (entry.lost) {
        counts.leaseLost++
        return Effect.zipRight(
          Effect.logWarning("docket: lease lost; the run was interrupted and nothing recorded").pipe(
            Effect.annotateLogs({ kind: entry.claim.kind, id: entry.claim.id, attempt: entry.claim.attempt })
          ),
          Effect.zipRight(publish({ _tag: "LeaseLost", claim: entry.claim }), Metric.increment(metrics.leaseLost))
        )
      }
      return releaseClaims([entry.claim])
    }

    // Runs one item in its slot's fiber. Interruption is handled once per slot
    // (see slotLoop), not per item: two interruption regions per item cost
    // more than a no-op handler's whole run.
    const runItem = (entry: Running): Effect.Effect<void> => {
      const { claim, slot } = entry
      slot.controller = undefined
      // Most handlers never look at job.signal: make the controller on demand.
      const abort = () => (slot.controller ??= new AbortController()).signal
      const started = performance.now()
      metricsLag(Math.max(0, Date.now() - claim.runAt))
      const run = Effect.flatMap(decideRun(claim, abort), (decision) => settle(entry, decision, performance.now() - started))
      const observed = subscribers > 0 ? Effect.zipRight(publish({ _tag: "Started", claim }), run) : run
      return traced
        ? Effect.withSpan(observed, "docket.item", {
          attributes: { "docket.kind": claim.kind, "docket.id": claim.id, "docket.attempt": claim.attempt },
          captureStackTrace: false
        })
        : observed
    }

    const scope = yield* Effect.scope

    // --- slots: `concurrency` long-lived fibers, each running one item at a time ---
    // (A fiber per item costs more than a no-op item's whole run; a slot
    // fiber is replaced only when its item's lease is lost.)
    interface Slot {
      fiber: Fiber.RuntimeFiber<void, never> | undefined
      /** The run in progress, until its outcome is queued. */
      current: Running | undefined
      controller: AbortController | undefined
    }
    const slots = new Set<Slot>()
    const parked: Array<() => void> = []

    const canStart = (claim: Claim) => {
      const limit = kindLimits.get(claim.kind)
      return limit === undefined || kindCount(claim.kind) < limit
    }
    const takeOne = () => {
      if (stopping || buffer.size === 0) return undefined
      const taken = buffer.takeOne(kindLimits.size > 0 ? canStart : undefined)
      if (taken !== undefined) starts++
      return taken
    }

    // Resumes parked slots while buffered items wait.
    function dispatchSync() {
      let n = Math.min(parked.length, stopping ? parked.length : buffer.size)
      while (n-- > 0) parked.pop()!()
    }
    const dispatch: Effect.Effect<void> = Effect.sync(dispatchSync)

    // Checked again at the moment of parking: the fiber may have yielded
    // between finding the buffer empty and parking, while items arrived.
    const park = Effect.async<void>((resume) => {
      if (stopping || buffer.some(kindLimits.size > 0 ? canStart : undefined)) resume(Effect.void)
      else {
        parked.push(() => {
          // Woken with new items after waiting (the event loop has turned
          // meanwhile): its next turn is due TURN_MS from now, not at once.
          lastTurn = performance.now()
          resume(Effect.void)
        })
      }
    })

    // Slots run items back to back in microtasks, and microtasks starve the
    // event loop: the results of the next claim and of the outcome writes
    // (socket reads), timers and IPC would wait until every slot is idle, so
    // claiming and running would take turns instead of overlapping. The slots
    // give the event loop a turn when it has not had one for TURN_MS; all of
    // them wait for the same turn.
    let lastTurn = performance.now()
    let turnWaiters = new Set<() => void>()
    const giveTurn = Effect.async<void>((resume) => {
      const waiter = () => resume(Effect.void)
      turnWaiters.add(waiter)
      if (turnWaiters.size === 1) {
        setImmediate(() => {
          lastTurn = performance.now()
          const waiters = turnWaiters
          turnWaiters = new Set()
          for (const w of waiters) w()
        })
      }
      return Effect.sync(() => turnWaiters.delete(waiter))
    })

    const slotLoop = (slot: Slot): Effect.Effect<void> =>
      Effect.whileLoop({
        while: () => !stopping && slots.has(slot),
        body: () =>
          Effect.suspend(() => {
            if (performance.now() - lastTurn > TURN_MS) return giveTurn
            if (yieldForClaimer) {
              // The buffer ran low and the claimer was woken: one slot yields
              // once, so the claimer sends its claim now rather than when every
              // slot has run out of items (fibers take turns only when one yields).
              yieldForClaimer = false
              return Effect.yieldNow()
            }
            const taken = takeOne()
            if (taken === undefined) return park
            const { at, claim } = taken
            // The lease began no earlier than the claim was sent; 10% margin.
            const deadline = at + leaseMs * 0.9
            if (performance.now() > deadline) {
              // The process stalled (a long GC, a synchronous SQLite lock wait)
              // between claim and start: the lease may be gone and the item
              // run elsewhere. Not started; it is due again when the lease ends.
              counts.leaseLost++
              return Effect.zipRight(
                Effect.logWarning("docket: lease ran out before the item could start; not started").pipe(
                  Effect.locally(currentItem, claim)
                ),
                publish({ _tag: "LeaseLost", claim })
              )
            }
            const entry: Running = { claim, slot, deadline, lost: false }
            slot.current = entry
            running.add(entry)
            kindRunning.set(claim.kind, kindCount(claim.kind) + 1)
            // Its log annotations come from slot.current (see annotated).
            return runItem(entry)
          }),
        step: () => undefined
      }).pipe(
        Effect.onInterrupt(() => (slot.current === undefined ? Effect.void : interrupted(slot.current))),
        Effect.ensuring(Effect.sync(() => slots.delete(slot)))
      )

    // Daemon fibers, not in the layer's scope: closing the scope must not
    // interrupt running items before shutdown has given them their grace.
    const startSlot = Effect.suspend(() => {
      const slot: Slot = { fiber: undefined, current: undefined, controller: undefined }
      slots.add(slot)
      return Effect.map(Effect.forkDaemon(
          slotLoop(slot).pipe(
            Effect.locally(currentItem, slot),
            Effect.locallyWith(FiberRef.currentLoggers, HashSet.map(annotated))
          )
        ), (fiber) => {
        slot.fiber = fiber
      })
    })

    // --- recording outcomes, in batches ---
    const releaseClaims = (claims: ReadonlyArray<Claim>) =>
      claims.length === 0 ? Effect.void : repo.releaseMany(claims).pipe(
        Effect.flatMap((outcomes) =>
          Effect.forEach(outcomes, (outcome, i) => {
            if (outcome === "stale") return Effect.void
            counts.released++
            return Effect.zipRight(
              publish(outcome === "absorbed" ? { _tag: "Absorbed", claim: claims[i] } : { _tag: "Released", claim: claims[i] }),
              Metric.increment(metrics.released)
            )
          }, { discard: true })
        ),
        Effect.catchAll(storageFailed("release"))
      )

    const recordBatch = (batch: ReadonlyArray<Outcome>) => {
      const done = batch.filter((o): o is Extract<Outcome, { _tag: "Done" }> => o._tag === "Done")
      const failed = batch.filter((o): o is Extract<Outcome, { _tag: "Fail" }> => o._tag === "Fail")
      const completeAll = done.length === 0 ? Effect.void : repo.completeMany(done.map((o) => o.claim)).pipe(
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
            Effect.logWarning("docket: completion refused: the lease was lost before it was recorded").pipe(
              Effect.annotateLogs({ kind: claim.kind, id: claim.id })
            ), { discard: true })
          const notify = subscribers === 0 ? Effect.void : Effect.forEach(done, (o, i) =>
            applied[i] ? publish({ _tag: "Completed", claim: o.claim, durationMs: o.durationMs }) : Effect.void, {
            discard: true
          })
          return Effect.zipRight(warn, notify)
        })
      )
      const failAll = failed.length === 0 ? Effect.void : repo.failMany(failed).pipe(
        Effect.flatMap((outcomes) =>
          Effect.forEach(failed, (o, i) => {
            const annotate = Effect.annotateLogs({ kind: o.claim.kind, id: o.claim.id, attempt: o.claim.attempt })
            switch (outcomes[i]) {
              case "retried":
                counts.retried++
                // This pool wakes itself when its retry is due, instead of
                // waiting for the poll (the claimer may be sleeping).
                if (o.delayMs < pollMs) {
                  setTimeout(wakeups.notify, o.delayMs + 1).unref()
                }
                return Effect.zipRight(
                  publish({ _tag: "Retried", claim: o.claim, error: o.error, delayMs: o.delayMs }),
                  Effect.zipRight(
                    Metric.increment(metrics.retried),
                    annotate(Effect.logInfo(`docket: failed, retry in ${Math.round(o.delayMs)} ms: ${o.error}`))
                  )
                )
              case "dead":
                counts.dead++
                return Effect.zipRight(
                  publish({ _tag: "Dead", claim: o.claim, error: o.error }),
                  Effect.zipRight(Metric.increment(metrics.dead), annotate(Effect.logWarning(`docket: dead: ${o.error}`)))
                )
              case "absorbed":
                counts.absorbed++
                return publish({ _tag: "Absorbed", claim: o.claim })
              default:
                counts.stale++
                return annotate(Effect.logWarning("docket: failure refused: the lease was lost before it was recorded"))
            }
          }, { discard: true })
        )
      )
      // Both statements run to their end: if one fails, the other is not cut
      // off (its cancel could land after its commit, and its items would be
      // written twice, the second time refused as stale). Returns the
      // outcomes to write again, those of the statement that failed.
      return Effect.all([Effect.either(completeAll), Effect.either(failAll)], { concurrency: 2 }).pipe(
        Effect.flatMap(([c, f]) => {
          const again: Array<Outcome> = [...(Either.isLeft(c) ? done : []), ...(Either.isLeft(f) ? failed : [])]
          const errors = [c, f].flatMap((r) => (Either.isLeft(r) ? [r.left] : []))
          return Effect.as(Effect.forEach(errors, storageFailed("record outcome"), { discard: true }), again)
        })
      )
    }

    // Takes whatever outcomes are ready; while a batch is being written, new
    // ones gather for the next (batching without waiting). On a storage error
    // the outcomes of the statement that failed are kept and retried.
    const flushOnce = Effect.suspend(() => {
      if (pending.length === 0) return Effect.void
      const batch = pending.splice(0, 5000)
      recording = batch
      return recordBatch(batch).pipe(
        Effect.ensuring(Effect.sync(() => (recording = []))),
        Effect.flatMap((again) =>
          again.length === 0
            ? Effect.void
            : Effect.zipRight(Effect.sync(() => pending.unshift(...again)), Effect.sleep("200 millis"))
        ),
        Effect.zipRight(checkIdle)
      )
    })
    const flusher = Effect.whileLoop({
      while: () => !(outcomesClosed && pending.length === 0),
      body: () =>
        Queue.take(flushes).pipe(
          Effect.zipRight(flushOnce),
          Effect.zipRight(Effect.suspend(() => (pending.length > 0 ? Queue.offer(flushes, undefined) : Effect.void))),
          Effect.zipRight(yieldToEventLoop)
        ),
      step: () => undefined
    })

    // --- lease renewal: one fenced statement for every running item ---
    const renewOnce = Effect.suspend(() => {
      const entries = [...running].filter((e) => !e.lost)
      // Items whose handler ended but whose outcome is not written yet (the
      // database is slow or down) keep their lease too, or another worker
      // would run them again.
      const unrecorded = [...pending, ...recording].map((o) => o.claim)
      if (entries.length === 0 && unrecorded.length === 0) return Effect.void
      const sent = performance.now()
      const lose = (entry: Running) => {
        entry.lost = true
        const fiber = entry.slot.fiber
        if (fiber === undefined) return Effect.void
        // The slot goes with its item; a new slot takes its place.
        slots.delete(entry.slot as Slot)
        return Effect.forkDaemon(
          Effect.zipRight(Fiber.interrupt(fiber), Effect.suspend(() => (stopping ? Effect.void : startSlot)))
        )
      }
      return repo.extendMany([...entries.map((e) => e.claim), ...unrecorded], Duration.millis(leaseMs)).pipe(
        Effect.flatMap((applied) =>
          Effect.forEach(entries, (entry, i) => {
            if (applied[i]) {
              entry.deadline = sent + leaseMs
              return Effect.void
            }
            return running.has(entry) ? lose(entry) : Effect.void
          }, { discard: true })
        ),
        Effect.catchAll((error) =>
          Effect.zipRight(
            storageFailed("extend lease")(error),
            // Cannot renew: once a lease has surely run out, another worker may
            // run the item, so this run stops.
            Effect.forEach(entries, (e) => (performance.now() > e.deadline ? lose(e) : Effect.void), { discard: true })
          )
        )
      )
    })
    const renewer = Effect.repeat(renewOnce, Schedule.spaced(Duration.millis(renewEveryMs)))

    // --- claiming ---
    const claimKinds = (): ReadonlyArray<string> | undefined => {
      const saturated = [...kindLimits].filter(([kind, limit]) => kindCount(kind) >= limit).map(([k]) => k)
      if (!claimHandledOnly && saturated.length === 0) return undefined
      return [...handlers.keys()].filter((k) => !saturated.includes(k))
    }

    const sweepBuffer = Effect.suspend(() => {
      if (buffer.size === 0) return Effect.void
      const old = buffer.takeOlderThan(performance.now() - holdMs)
      if (old.length === 0) return Effect.void
      prefetchPaused = true
      return releaseClaims(old)
    })

    // Adaptive prefetch: as many items as this pool starts in about half the
    // hold time (measured), between its concurrency and the `prefetch` bound.
    // Fast handlers get large batches (fewer round trips per item); slow ones
    // keep only what they can start soon, leaving the rest to other workers.
    const minPrefetch = Math.min(prefetch, concurrency)
    let effectivePrefetch = minPrefetch
    let windowStart = performance.now()
    let windowStarts = 0
    const adaptPrefetch = () => {
      const now = performance.now()
      const elapsed = now - windowStart
      if (elapsed < 250) return
      const rate = (starts - windowStarts) / elapsed
      windowStart = now
      windowStarts = starts
      effectivePrefetch = Math.max(minPrefetch, Math.min(prefetch, Math.ceil(rate * holdMs * 0.5)))
    }
    const lowWater = () => Math.floor(effectivePrefetch / 2)

    const claimRound: Effect.Effect<void> = Effect.gen(function*() {
      claimerWanted = false
      yield* sweepBuffer
      adaptPrefetch()
      const starving = running.size < concurrency && buffer.size === 0
      // Slow start: slots ran dry although the last claim was full, so a larger
      // prefetch would have kept them busy; do not wait for the next measurement.
      // Quadrupled (10 -> 8000 in five claims): doubling took ten, a few
      // percent of a 20,000-job drain (W2: 46.7k -> 48-49k jobs/s).
      if (starving && !lastClaimDrained && !prefetchPaused) {
        effectivePrefetch = Math.min(prefetch, Math.max(minPrefetch, effectivePrefetch * 4))
      }
      const room = Math.min(MAX_CLAIM_LIMIT, concurrency + (prefetchPaused ? 0 : effectivePrefetch) - running.size - buffer.size)
      if (room <= 0 || (!starving && buffer.size > lowWater())) {
        // Full: wait until a slot frees (finish wakes us), or sweep the buffer.
        return yield* wakeups.wait(Math.min(pollMs, holdMs))
      }
      const kinds = claimKinds()
      if (kinds !== undefined && kinds.length === 0) return yield* wakeups.wait(pollMs)
      const sentAt = performance.now()
      const claims = yield* repo.claim({ worker: id, limit: room, lease: Duration.millis(leaseMs), kinds }).pipe(
        Effect.catchAll((error) =>
          Effect.as(Effect.zipRight(storageFailed("claim")(error), Effect.sleep("500 millis")), [] as ReadonlyArray<Claim>)
        )
      )
      if (claims.length > 0) {
        for (const claim of claims) buffer.push(claim, sentAt)
        counts.claimed += claims.length
        yield* Metric.incrementBy(metrics.claimed, claims.length)
        yield* Effect.forEach(claims, (claim) => publish({ _tag: "Claimed", claim }), { discard: true })
        yield* dispatch
      }
      yield* yieldToEventLoop
      if (claims.length === room) {
        lastClaimDrained = false
        return
      }
      // Drained for now: sleep until a wake-up, the next due time, or the poll.
      lastClaimDrained = true
      yield* checkIdle
      const next = yield* repo.nextDueIn.pipe(Effect.orElseSucceed(() => Option.none<Duration.Duration>()))
      const nextMs = Option.match(next, { onNone: () => pollMs, onSome: Duration.toMillis })
      yield* wakeups.wait(nextMs > 0 ? Math.min(pollMs, nextMs + 5) : pollMs)
    })

    const claimer = Effect.whileLoop({
      while: () => !stopping,
      body: () => claimRound,
      step: () => undefined
    })

    const renewerFiber = yield* Effect.forkIn(renewer, scope)
    const flusherFiber = yield* Effect.forkIn(flusher, scope)
    for (let i = 0; i < concurrency; i++) yield* startSlot
    const claimerFiber = yield* Effect.forkIn(claimer, scope)

    // Shutdown runs as the scope's finalizer, which is uninterruptible: every
    // bounded wait in it is made interruptible, or its timeout could never fire.
    const boundedWait = <A, E>(effect: Effect.Effect<A, E>, ms: number) =>
      Effect.timeoutOption(Effect.interruptible(effect), Duration.millis(ms))

    const shutdown = Effect.gen(function*() {
      stopping = true
      // Let the claimer finish its round (a claim cut off mid-statement could
      // lease items nobody holds); it sees `stopping` at its next turn.
      yield* wake
      const stopped = yield* boundedWait(Fiber.await(claimerFiber), 5000)
      if (Option.isNone(stopped)) yield* Fiber.interrupt(claimerFiber)
      yield* Scope.close(wakeupScope, Exit.void)
      yield* releaseClaims(buffer.takeAll())
      yield* dispatch // parked slots wake, see `stopping` and end
      if (running.size > 0) {
        allDone = yield* Deferred.make<void>()
        const finished = yield* boundedWait(Deferred.await(allDone), graceMs)
        if (Option.isNone(finished)) {
          yield* Effect.logWarning(`docket: ${running.size} items still running after the grace period; interrupting them`)
          const fibers = [...running].flatMap((e) => (e.slot.fiber === undefined ? [] : [e.slot.fiber]))
          // Their interruption releases their leases (attempt not counted).
          yield* Fiber.interruptAll(fibers)
        }
      }
      // The outcomes: the flusher writes what is pending and ends. It is not
      // interrupted while it writes: that would cancel its statement, and the
      // batch it carried would be lost (those items would run again once
      // their leases ran out). The renewer keeps their leases meanwhile.
      outcomesClosed = true
      const unwritten = pending.length + recording.length
      if (unwritten > 0) yield* Effect.logInfo(`docket: stopping: recording ${unwritten} outcomes`)
      yield* Queue.offer(flushes, undefined)
      const flushed = yield* boundedWait(Fiber.await(flusherFiber), OUTCOME_GRACE_MS)
      // Unwritten: the time ran out, or the flusher died of a defect.
      const unrecorded = pending.length + recording.length
      if (Option.isNone(flushed)) yield* Fiber.interrupt(flusherFiber)
      else if (Exit.isFailure(flushed.value)) {
        yield* Effect.logError("docket: the outcome writer failed", flushed.value.cause)
      }
      if (unrecorded > 0) {
        yield* Effect.logWarning(
          `docket: ${unrecorded} outcomes not recorded at shutdown; their items run again once their leases run out`
        )
      }
      yield* Fiber.interrupt(renewerFiber)
      yield* publish({ _tag: "Stopped", counters: { ...counts, running: running.size, buffered: buffer.size } })
    }).pipe(Effect.annotateLogs({ worker: id }))

    yield* Effect.addFinalizer(() => shutdown)
    yield* Effect.logDebug("docket: worker started").pipe(Effect.annotateLogs({ worker: id, concurrency }))

    const service: Service = {
      id,
      subscribe: Effect.zipLeft(
        PubSub.subscribe(events),
        Effect.acquireRelease(Effect.sync(() => subscribers++), () => Effect.sync(() => subscribers--))
      ),
      counters: Effect.sync(() => ({ ...counts, running: running.size, buffered: buffer.size })),
      whenIdle: Effect.suspend(() => {
        if (isIdle()) return Effect.void
        return Effect.flatMap(Deferred.make<void>(), (d) => {
          idleWaiters.push(d)
          return Effect.zipRight(wake, Deferred.await(d))
        })
      }),
      wake
    }
    return service
  })

/** The pool as a layer: built, it runs in the layer's scope; released, it shuts down gracefully. */
export const layer = <H extends Handler.Any>(
  options: Options<H>
): Layer.Layer<Worker, never, QueueRepo | Wakeups.Wakeups | Handler.Requirements<H>> => Layer.scoped(Worker, make(options))
