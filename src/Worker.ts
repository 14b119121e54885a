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
 *   taken by another worker, or the item cancelled (or that cannot reach the
 *   database until the lease surely ran out) interrupts that run and records
 *   nothing.
 * - Cancels (`QueueRepo.cancel`): a run of a cancelled item is interrupted
 *   when the pool hears of the cancel (a cancel in this process, and on
 *   PostgreSQL a notification from any process), else at its next renewal.
 * - Outcomes: recorded in batches (one statement for all completions and one
 *   for all failures ready at that moment), each fenced by its claim token.
 * - Wake-ups (`Wakeups`): PostgreSQL NOTIFY from enqueues in any process,
 *   enqueues through this process's `QueueRepo`, a timer at the next due
 *   time; the poll is only the fallback.
 * - Shutdown (when the layer's scope closes): stop claiming, release the
 *   prefetched items, let running items finish for up to `grace`, then
 *   interrupt them and release their leases (attempt not counted), then
 *   write the outcomes not yet written. Every database wait on the way shares
 *   one budget of 10 s beyond the grace, so a shutdown on a database gone
 *   silent ends within the grace plus about 10 s (docs/operations.md).
 *
 * The parts live in src/internal/worker/ (docs/architecture.md): the state
 * (state.ts), prefetch sizing (prefetch.ts), the claimer, the slots, the
 * executor (one item's run), the recorder (outcome writes), the renewer, the
 * registry (the pool's row in the live-workers table) and the pruner
 * (finished items past their retention).
 * This module holds the options, the tag, the wiring and the shutdown order.
 */
import { Context, Effect, Either, ExecutionStrategy, Exit, Fiber, Layer, Option, type Queue, Scope } from "effect"
import type { InvalidSchedule } from "./Errors.js"
import type { Counters, Event, Tag } from "./Events.js"
import type * as Handler from "./Handler.js"
import { Cancels } from "./internal/worker/cancels.js"
import { Claimer } from "./internal/worker/claimer.js"
import * as Config from "./internal/worker/config.js"
import { Publisher } from "./internal/worker/events.js"
import { boundedWait, Budget, forkDetached, interruptWithin, SHUTDOWN_DB_MS } from "./internal/worker/bounded.js"
import { Executor } from "./internal/worker/executor.js"
import * as GlobalLimits from "./internal/worker/globalLimits.js"
import * as Handlers from "./internal/worker/handlers.js"
import { Prefetch } from "./internal/worker/prefetch.js"
import * as Pruner from "./internal/worker/pruner.js"
import { Recorder } from "./internal/worker/recorder.js"
import { Ticker } from "./internal/worker/recurring.js"
import * as Registry from "./internal/worker/registry.js"
import * as Renewer from "./internal/worker/renewer.js"
import { Slots } from "./internal/worker/slots.js"
import { IdleWaiters, PoolState, type Running } from "./internal/worker/state.js"
import { defaultTracer } from "./internal/tracing.js"
import { QueueRepo, type Service as RepoService } from "./QueueRepo.js"
import * as Recurring from "./Recurring.js"
import * as Wakeups from "./Wakeups.js"

/** The pool's counters (defined in Events.ts). */
export type { Counters } from "./Events.js"

/** The pool's options: its handlers, how it runs them (`PoolOptions`: concurrency, prefetch, lease, poll, grace, name, kinds), spans and LISTEN. */
export interface Options<H extends Handler.Any = Handler.Any> extends Config.PoolOptions {
  /** The handlers, one per kind. */
  readonly handlers: ReadonlyArray<H>
  /**
   * A `docket.item` span per run (default: only when the application installed
   * a tracer other than Effect's built-in one, e.g. @effect/opentelemetry).
   */
  readonly spans?: boolean | undefined
  /**
   * Listen for PostgreSQL notifications (default true; off behind a
   * transaction-pooling PgBouncer): enqueues wake the pool, and cancels stop
   * its runs at once. Without it a cancelled run stops at its next renewal.
   */
  readonly listen?: boolean | undefined
  /**
   * Recurring schedules (`Recurring.make`) this pool enqueues the ticks of,
   * exactly once per tick across every pool that declares them. Checked at
   * start: a bad one fails the pool with `InvalidSchedule` naming it. A pool
   * need not handle a schedule's kind (another fleet may).
   */
  readonly recurring?: ReadonlyArray<Recurring.Recurring> | undefined
}

/** The running pool. */
export interface Service {
  /** This worker's name, as recorded in `claimed_by`. */
  readonly id: string
  /** This pool's id in the live-workers table (`docket workers`): its name and a random part, unique per pool. */
  readonly poolId: string
  /** A subscription to the pool's events, for the subscription's scope. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Event>, never, Scope.Scope>
  /**
   * A subscription to the events of these tags only (say the failures), for
   * its scope. While no subscription takes every event, the pool makes none of
   * the others: a log of what went wrong costs nothing per item that ran well.
   */
  readonly subscribeTo: <T extends Tag>(
    tags: ReadonlyArray<T>
  ) => Effect.Effect<Queue.Dequeue<Extract<Event, { readonly _tag: T }>>, never, Scope.Scope>
  /** Counters since the pool started. */
  readonly counters: Effect.Effect<Counters>
  /**
   * Waits until this pool is idle: nothing running, buffered or waiting to be
   * recorded here, and its last claim found nothing due.
   */
  readonly whenIdle: Effect.Effect<void>
  /** Makes the pool look for due items now. */
  readonly wake: Effect.Effect<void>
}

/** The `Worker` service tag: the running pool. */
export class Worker extends Context.Tag("docket/Worker")<Worker, Service>() {}

/**
/** On shutdown, how long the claim in flight may take to end. */
const CLAIM_END_MS = 5000


/** The parts of one pool, as `build` wires them. */
interface Pool {
  readonly config: Config.Config
  readonly repo: RepoService
  readonly handlers: Handlers.HandlerTable
  readonly state: PoolState
  readonly publisher: Publisher
  /** Wakes the claimer: enqueues (here, and on PostgreSQL anywhere) and the pool's own nudges. */
  readonly wakeup: Wakeups.Signal
  /** Holds the wake-up's LISTEN connection: closed once claiming has stopped (else with the pool's scope). */
  readonly wakeupScope: Scope.CloseableScope
  readonly recorder: Recorder
  readonly slots: Slots
  readonly claimer: Claimer
  readonly renewer: Effect.Effect<never>
  readonly registry: Registry.Registry
  readonly ticker: Ticker
  readonly cancels: Cancels
  readonly idle: IdleWaiters
}

// Builds the parts and connects them: each gets the few callbacks it needs.
// Some callbacks name parts made further down (`idle`, `slots`, `claimer`):
// none is called before the pool starts, after `build` has returned.
const build = (options: Options<Handler.Any>, declarations: ReadonlyArray<Recurring.Declaration>) =>
  Effect.gen(function*() {
    const repo = yield* QueueRepo
    const config = Config.resolve(options)
    const { concurrency, id, leaseMs, pollMs } = config
    const handlers = Handlers.table(options.handlers, yield* Effect.context<never>(), repo.maxResultBytes)
    // A span per item costs as much as the rest of a no-op item's run; it is
    // made only when the application installed a tracer (e.g. OpenTelemetry).
    const traced = options.spans ?? ((yield* Effect.tracer) !== defaultTracer)
    const state = new PoolState(handlers.kindLimits)
    const publisher = yield* Publisher.make
    const wakeupScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    const cancels = yield* Cancels.make({
      repo,
      state,
      stop: (entry): Effect.Effect<void> => slots.replace(entry),
      dropped: (claim, error): Effect.Effect<void> =>
        Effect.zipRight(executor.cancelled(claim, error, "dropped before it started"), Effect.sync(() => idle.check()))
    })
    const wakeup = yield* (yield* Wakeups.Wakeups).signal({ listen: options.listen, onCancel: cancels.notice }).pipe(
      Scope.extend(wakeupScope)
    )
    const recorder = yield* Recorder.make({
      repo,
      counts: state.counts,
      publisher,
      wake: wakeup.notify,
      pollMs,
      checkIdle: () => idle.check(),
      // Only while the claimer sleeps because its last claim found nothing:
      // a claim that found some runs again as slots free anyway (and waking
      // it after every write cost W2 a claim per batch written).
      wrote: () => {
        if (state.mode === "empty") wakeup.notify()
      }
    })
    const idle = new IdleWaiters(() => state.quiet() && recorder.size === 0)
    // A run ended (synchronous: it cannot be cut in half by an interruption).
    const finished = (entry: Running) => {
      state.end(entry)
      slots.dispatch()
      claimer.slotFreed()
      idle.check()
    }
    const executor = new Executor({ worker: id, handlers, counts: state.counts, publisher, recorder, traced, finished })
    const slots = new Slots({ state, executor, worker: id, leaseMs })
    const claimer = new Claimer({
      repo,
      state,
      prefetch: new Prefetch(config.prefetch, concurrency, config.holdMs, performance.now()),
      wakeup,
      publisher,
      worker: id,
      concurrency,
      leaseMs,
      pollMs,
      holdMs: config.holdMs,
      handlerKinds: [...handlers.byKind.keys()],
      handledOnly: config.handledOnly,
      maxAttemptsByKind: handlers.maxAttempts,
      release: (claims) => recorder.release(claims),
      dispatch: slots.dispatch,
      checkIdle: idle.check
    })
    const renewer = Renewer.run({
      repo,
      leaseMs,
      running: state.running,
      unrecorded: () => recorder.unrecorded(),
      publisher,
      onLost: (entry) => slots.replace(entry)
    })
    const registry = new Registry.Registry({
      repo,
      registration: Registry.registration(id, config.handledOnly ? [...handlers.byKind.keys()] : null, concurrency),
      intervalMs: config.heartbeatMs,
      running: () => state.running.size,
      publisher
    })
    const ticker = new Ticker({ repo, declarations, publisher, wake: wakeup.notify })
    return {
      config, repo, handlers, state, publisher, wakeup, wakeupScope, recorder, slots, claimer, renewer, registry, ticker,
      cancels, idle
    } satisfies Pool
  })

/**
 * Shutdown, in order: stop claiming (the claim in flight ends first: one cut
 * off mid-statement could lease items nobody holds), stop listening, give the
 * buffer back, let running items finish for up to the grace, then interrupt
 * them (their interruption releases their leases, attempt not counted), write
 * the outcomes not yet written, leave the live-workers table, stop renewing.
 * Each database wait is bounded, by its own bound and by what is left of one
 * budget of 10 s (SHUTDOWN_DB_MS) for them all: on a database gone silent
 * (a partition) nothing answers, and a stop must still end. The claim in
 * flight gets up to 5 s of it (past that it is interrupted: the items it may
 * have leased run again once their leases run out).
 */
const shutdown = (pool: Pool, claimer: Fiber.RuntimeFiber<void>, renewer: Fiber.RuntimeFiber<never>) =>
  Effect.gen(function*() {
    const { recorder, slots, state } = pool
    // Every database wait below shares it (the grace is not charged to it).
    const budget = new Budget(SHUTDOWN_DB_MS)
    // First: a pool that stops enqueueing ticks (the others, or its next start, take them).
    yield* Effect.asVoid(budget.wait(pool.ticker.stop))
    state.setMode("stopping")
    pool.wakeup.notify() // the claimer sees `stopping` at its next turn
    const stopped = yield* budget.wait(Fiber.await(claimer), CLAIM_END_MS)
    if (Option.isNone(stopped)) yield* interruptWithin(claimer, budget.left)
    state.setMode("stopped")
    yield* Effect.asVoid(budget.wait(Scope.close(pool.wakeupScope, Exit.void)))
    const prefetched = state.buffer.takeAll()
    const released = yield* budget.wait(recorder.release(prefetched))
    if (Option.isNone(released) && prefetched.length > 0) {
      yield* Effect.logWarning(
        `docket: ${prefetched.length} prefetched items not given back at shutdown (no answer from the database); ` +
          "they run again once their leases run out"
      )
    }
    slots.dispatch() // parked slots wake, see `stopping` and end
    if (state.running.size > 0) {
      const ended = yield* boundedWait(state.noneRunning, pool.config.graceMs)
      if (Option.isNone(ended)) {
        yield* Effect.logWarning(`docket: ${state.running.size} items still running after the grace period; interrupting them`)
        // Their interruption releases their leases: bounded like the rest.
        yield* Effect.asVoid(budget.wait(Fiber.interruptAll(slots.runningFibers())))
      }
    }
    // Unwritten: the time ran out, or the writer died of a defect.
    const unrecorded = yield* recorder.close(budget.left)
    if (unrecorded > 0) {
      yield* Effect.logWarning(
        `docket: ${unrecorded} outcomes not recorded at shutdown; their items run again once their leases run out`
      )
    }
    // Only now: until its outcomes are written the pool still holds work.
    yield* pool.registry.stop(budget.left)
    yield* interruptWithin(renewer, budget.left)
    yield* pool.publisher.publish({ _tag: "Stopped", counters: state.counters() })
  }).pipe(Effect.annotateLogs({ worker: pool.config.id }))

/**
 * Starts a pool in the current scope; closing the scope shuts it down
 * gracefully. Needs the `QueueRepo`, `Wakeups` and whatever the handlers need.
 * Fails (before anything is written) with `InvalidSchedule` for a bad schedule.
 */
export const make = <H extends Handler.Any>(
  options: Options<H>
): Effect.Effect<Service, InvalidSchedule, QueueRepo | Wakeups.Wakeups | Scope.Scope | Handler.Requirements<H>> =>
  Effect.gen(function*() {
    const declarations = Recurring.checkAll(options.recurring ?? [])
    if (Either.isLeft(declarations)) return yield* declarations.left
    const pool = yield* build(options, declarations.right)
    const { concurrency, id } = pool.config
    const scope = yield* Effect.scope
    yield* GlobalLimits.declare(pool.repo, pool.handlers.globalLimits)
    yield* pool.registry.start(scope)
    // Every fiber of the pool is detached (bounded.ts): its interruption, at
    // shutdown or when the scope closes, never waits on a silent database.
    const renewer = yield* forkDetached(pool.renewer, scope)
    // Interrupted when the scope closes, after shutdown (a cancel heard during
    // the grace still stops its run).
    yield* forkDetached(pool.cancels.run, scope)
    // Every pool prunes (no leader to elect; concurrent pruners never take
    // the same row), by the repository's retention.
    const { pruneMs } = pool.config
    if (pruneMs !== null) {
      yield* forkDetached(
        Pruner.run({ repo: pool.repo, intervalMs: pruneMs, counts: pool.state.counts, publisher: pool.publisher }),
        scope
      )
    }
    yield* pool.recorder.start(scope)
    for (let i = 0; i < concurrency; i++) yield* pool.slots.start
    const claimer = yield* forkDetached(pool.claimer.run, scope)
    // After the claimer: a tick's item enqueued at start is claimed at once.
    yield* pool.ticker.start(scope)
    yield* Effect.addFinalizer(() => shutdown(pool, claimer, renewer))
    yield* Effect.logDebug("docket: worker started").pipe(Effect.annotateLogs({ worker: id, concurrency }))
    const wake = Effect.sync(pool.wakeup.notify)
    return {
      id,
      poolId: pool.registry.id,
      subscribe: pool.publisher.subscribe,
      subscribeTo: pool.publisher.subscribeTo,
      counters: Effect.sync(() => pool.state.counters()),
      whenIdle: pool.idle.wait(wake),
      wake
    } satisfies Service
  })

/** The pool as a layer: built, it runs in the layer's scope; released, it shuts down gracefully. */
export const layer = <H extends Handler.Any>(
  options: Options<H>
): Layer.Layer<Worker, InvalidSchedule, QueueRepo | Wakeups.Wakeups | Handler.Requirements<H>> =>
  Layer.scoped(Worker, make(options))
