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
 * (state.ts) with the claimer's mode (mode.ts), prefetch sizing
 * (prefetch.ts), the claimer, the slots, the executor (one item's run), the
 * recorder (outcome writes), the renewer, the registry (the pool's row in the
 * live-workers table), the pruner (finished items past their retention), the
 * horizon watch (PostgreSQL's xmin horizon held back), the cancels, the
 * ticker (recurring schedules) and the wake-up. Each is built
 * by its module's `make` and started and stopped by one contract (part.ts).
 * This module holds the options, the tag, the wiring and the start list,
 * whose reverse is the shutdown order.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Claim } from "./Domain.js"
import type { InvalidSchedule } from "./Errors.js"
import type { Counters, Event, Tag } from "./Events.js"
import type * as Handler from "./Handler.js"
import { Budget, SHUTDOWN_DB_MS } from "./internal/worker/bounded.js"
import * as Cancels from "./internal/worker/cancels.js"
import * as Claimer from "./internal/worker/claimer.js"
import * as Config from "./internal/worker/config.js"
import * as Events from "./internal/worker/events.js"
import * as Executor from "./internal/worker/executor.js"
import * as GlobalLimits from "./internal/worker/globalLimits.js"
import * as Handlers from "./internal/worker/handlers.js"
import * as HorizonWatch from "./internal/worker/horizon.js"
import { LateBound, Lifecycle, type Part } from "./internal/worker/part.js"
import { Prefetch } from "./internal/worker/prefetch.js"
import * as Pruner from "./internal/worker/pruner.js"
import * as Recorder from "./internal/worker/recorder.js"
import * as Ticker from "./internal/worker/recurring.js"
import * as Registry from "./internal/worker/registry.js"
import * as Renewer from "./internal/worker/renewer.js"
import * as Slots from "./internal/worker/slots.js"
import { IdleWaiters, PoolState, type Running } from "./internal/worker/state.js"
import * as Wakeup from "./internal/worker/wakeup.js"
import { defaultTracer } from "./internal/tracing.js"
import { QueueRepo } from "./QueueRepo.js"
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
   * Listen for PostgreSQL notifications (default true): enqueues wake the
   * pool, and cancels stop its runs at once. Without it a cancelled run stops
   * at its next renewal. Behind a transaction-pooling PgBouncer LISTEN hears
   * nothing: give the LISTEN connection a URL of its own
   * (`Database.Options.listenDatabase`), else the pool finds out, warns once
   * and goes without (docs/scaling.md).
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
   * recorded here, its last claim found fewer items than it asked for, and
   * nothing since (an outcome written, a wake-up) owes it another claim.
   */
  readonly whenIdle: Effect.Effect<void>
  /** Makes the pool look for due items now. */
  readonly wake: Effect.Effect<void>
}

/** The `Worker` service tag: the running pool. */
export class Worker extends Context.Tag("docket/Worker")<Worker, Service>() {}

/**
 * The calls parts built earlier make on parts built later (part.ts,
 * `LateBound`): filled once by `build` when every part exists.
 */
interface Hooks {
  /** A run ended (synchronous: it cannot be cut in half by an interruption): its slot is free. The executor's. */
  readonly finished: (entry: Running) => void
  /** Stops a run a cancel stopped (the slots replace it). The cancels'. */
  readonly stopRun: (entry: Running) => Effect.Effect<void>
  /** A buffered claim of a cancelled item, dropped before it started. The cancels'. */
  readonly dropped: (claim: Claim, error: string) => Effect.Effect<void>
  /** The pool may be idle now. The recorder's. */
  readonly checkIdle: () => void
  /** A batch of outcomes was written. The claimer's. */
  readonly wrote: () => void
}

/** One pool: its parts' lifecycle and what the running pool's service reads. */
interface Pool {
  readonly config: Config.Config
  readonly state: PoolState
  readonly publisher: Events.Publisher
  readonly wakeup: Wakeup.Wakeup
  readonly registry: Registry.Registry
  readonly idle: IdleWaiters
  readonly lifecycle: Lifecycle
}

/**
 * The start list. Shutdown stops the parts in reverse, so read backwards it
 * IS the shutdown order:
 * - ticker: first, a pool that stops enqueueing ticks (the others, or its
 *   next start, take them); started last, so a tick's item enqueued at start
 *   is claimed at once;
 * - claimer: stop claiming; the claim in flight ends first, up to 5 s (one
 *   cut off mid-statement could lease items nobody holds); no item starts
 *   from here on;
 * - slots: give the prefetched items back, let running items finish for up
 *   to the grace, then interrupt them (their interruption releases their
 *   leases, attempt not counted);
 * - recorder: write the outcomes not yet written;
 * - registry: leave the live-workers table, only now (until its outcomes are
 *   written the pool still holds work);
 * - renewer: stop renewing (it kept the unwritten outcomes' leases);
 * - wake-up: close the LISTEN connection and this process's cancel
 *   registration, only after the grace: they carry the cancel notices (a
 *   cancel heard while items finish still stops its run; closed before the
 *   slots, as until 2026-12-06, a run cancelled during the grace ran on
 *   until its next renewal or the grace's end). The claimer, stopped, no
 *   longer waits on its wake-ups;
 * - cancels: after the wake-up, whose notices it acts on;
 * - horizon watch, pruner and global limits: background work with nothing
 *   to hand over;
 * - events: `Stopped`, the pool's last event.
 * Started the other way round: the global limits are written and the pool
 * registered before the first claim, and the writer and the slots run before
 * the claimer hands them items. Every database wait of the shutdown shares
 * one budget of 10 s (SHUTDOWN_DB_MS); the grace is not charged to it.
 */
const startList = (p: {
  readonly publisher: Part
  readonly globalLimits: Part
  readonly pruner: Part
  readonly horizon: Part
  readonly cancels: Part
  readonly wakeup: Part
  readonly renewer: Part
  readonly registry: Part
  readonly recorder: Part
  readonly slots: Part
  readonly claimer: Part
  readonly ticker: Part
}): ReadonlyArray<Part> => [
  p.publisher,
  p.globalLimits,
  p.pruner,
  p.horizon,
  p.cancels,
  p.wakeup,
  p.renewer,
  p.registry,
  p.recorder,
  p.slots,
  p.claimer,
  p.ticker
]

// Builds the parts in dependency order: each is given the parts built before
// it, and the few calls on later ones go through `hooks`, filled at the end.
const build = (options: Options<Handler.Any>, declarations: ReadonlyArray<Recurring.Declaration>) =>
  Effect.gen(function*() {
    const repo = yield* QueueRepo
    const config = Config.resolve(options)
    const { concurrency, id: worker, leaseMs, pollMs } = config
    const handlers = Handlers.table(options.handlers, yield* Effect.context<never>(), repo.maxResultBytes)
    // A span per item costs as much as the rest of a no-op item's run; it is
    // made only when the application installed a tracer (e.g. OpenTelemetry).
    const traced = options.spans ?? ((yield* Effect.tracer) !== defaultTracer)
    const state = new PoolState(handlers.kindLimits)
    const { counts } = state
    const hooks = new LateBound<Hooks>("the pool's hooks")
    const publisher = yield* Events.make({ counters: () => state.counters() })
    const globalLimits = yield* GlobalLimits.make({ repo, limits: handlers.globalLimits, perGroup: handlers.perGroup })
    const pruner = yield* Pruner.make({ repo, intervalMs: config.pruneMs, counts, publisher })
    const horizon = yield* HorizonWatch.make({ repo, config: config.horizon, publisher })
    const cancels = yield* Cancels.make({
      repo,
      state,
      stop: (entry) => hooks.get().stopRun(entry),
      dropped: (claim, error) => hooks.get().dropped(claim, error)
    })
    const wakeups = yield* Wakeups.Wakeups
    const wakeup = yield* Wakeup.make({ wakeups, listen: options.listen, onCancel: cancels.notice })
    const recorder = yield* Recorder.make({
      repo, counts, publisher, pollMs,
      wake: wakeup.notify,
      checkIdle: () => hooks.get().checkIdle(),
      // A short claim overlapped by a write claims again (the claimer's `wrote`).
      wrote: () => hooks.get().wrote()
    })
    const idle = new IdleWaiters(() => state.quiet(wakeup.pending()) && recorder.size === 0)
    const finished = (entry: Running) => hooks.get().finished(entry)
    const executor = yield* Executor.make({
      worker, handlers, counts, publisher, recorder, traced, finished, repo, leaseMs,
      transactions: yield* Effect.makeSemaphore(config.transactions)
    })
    const slots = yield* Slots.make({
      state, executor, worker, leaseMs, concurrency,
      graceMs: config.graceMs,
      release: (claims) => recorder.release(claims)
    })
    const renewer = yield* Renewer.make({
      repo, leaseMs, publisher, running: state.running, unrecorded: () => recorder.unrecorded(), onLost: slots.replace
    })
    const registry = yield* Registry.make({
      repo,
      registration: Registry.registration(worker, config.handledOnly ? [...handlers.byKind.keys()] : null, concurrency),
      intervalMs: config.heartbeatMs,
      running: () => state.running.size,
      publisher
    })
    const claimer = yield* Claimer.make({
      repo, state, wakeup, publisher, worker, concurrency, leaseMs, pollMs,
      prefetch: new Prefetch(config.prefetch, concurrency, config.holdMs, performance.now()),
      holdMs: config.holdMs,
      handlerKinds: [...handlers.byKind.keys()],
      handledOnly: config.handledOnly,
      maxAttemptsByKind: handlers.maxAttempts,
      traced,
      release: (claims) => recorder.release(claims),
      dispatch: slots.dispatch,
      checkIdle: idle.check
    })
    const ticker = yield* Ticker.make({ repo, declarations, publisher, wake: wakeup.notify })
    hooks.fill({
      finished: (entry) => {
        state.end(entry)
        slots.dispatch()
        claimer.slotFreed()
        idle.check()
      },
      stopRun: slots.replace,
      dropped: (claim, error) =>
        Effect.zipRight(executor.cancelled(claim, error, "dropped before it started"), Effect.sync(idle.check)),
      checkIdle: idle.check,
      wrote: claimer.wrote
    })
    const lifecycle = new Lifecycle(startList({
      publisher, globalLimits, pruner, horizon, cancels, renewer, registry, recorder, slots, wakeup, claimer, ticker
    }))
    return { config, state, publisher, wakeup, registry, idle, lifecycle } satisfies Pool
  })

/**
 * Shutdown: the parts stopped in reverse order (see `startList`). Each
 * database wait is bounded, by its own bound and by what is left of one
 * budget of 10 s (SHUTDOWN_DB_MS) for them all: on a database gone silent (a
 * partition) nothing answers, and a stop must still end. The grace is not
 * charged to it.
 */
const shutdown = (pool: Pool) =>
  Effect.suspend(() => pool.lifecycle.stop(new Budget(SHUTDOWN_DB_MS))).pipe(
    Effect.annotateLogs({ worker: pool.config.id })
  )

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
    // Every fiber of the pool is detached (bounded.ts): its interruption, at
    // shutdown or when the scope closes, never waits on a silent database.
    // A start cut short (interrupted while the database is slow, or failed)
    // stops what it started, as a shutdown would: the slots run as daemons,
    // and items they took would otherwise run on with no renewer or recorder.
    yield* pool.lifecycle.start(yield* Effect.scope).pipe(
      Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : shutdown(pool)))
    )
    // After the parts' own finalizers (their fibers'), so it runs before them.
    yield* Effect.addFinalizer(() => shutdown(pool))
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
