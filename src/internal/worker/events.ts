/**
 * The pool's events and metrics. Events are made only while someone listens:
 * a pool with no subscriber spends nothing on them. They go into a sliding
 * buffer, so a slow subscriber loses its oldest events and never slows the pool.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type { Counters, Event, Tag } from "../../Events.js"
import type { Part } from "./part.js"

/** The pool's metrics (Effect's Metric: exported by whatever metrics backend the application installs). */
export const metrics = {
  claimed: Metric.counter("docket_items_claimed", { description: "Items claimed by this worker" }),
  completed: Metric.counter("docket_items_completed", { description: "Items done" }),
  retried: Metric.counter("docket_items_retried", { description: "Items failed and scheduled again" }),
  snoozed: Metric.counter("docket_items_snoozed", { description: "Items snoozed by their handler (attempt not counted)" }),
  dead: Metric.counter("docket_items_dead", { description: "Items kept as dead" }),
  cancelled: Metric.counter("docket_items_cancelled", {
    description: "Items cancelled while this worker held them, or by their handler's Cancel outcome"
  }),
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

/** A subscription to some of the events only, with a queue of its own. */
interface Filtered {
  readonly tags: ReadonlySet<Tag>
  readonly queue: Queue.Queue<Event>
}

/** What the events part needs from the pool. */
export interface PublisherDeps {
  /** The pool's counters, for the `Stopped` event. */
  readonly counters: () => Counters
}

/**
 * Publishes the pool's events to its subscribers. As a part: started first
 * and stopped last, its stop publishes `Stopped`, the pool's last event.
 */
export class Publisher implements Part {
  readonly name = "events"
  private subscribers = 0
  private readonly filtered = new Set<Filtered>()

  /** Built by `make`. */
  constructor(private readonly events: PubSub.PubSub<Event>, private readonly deps: PublisherDeps) {}

  /** Nothing to start: events are published from the moment the pool is built. */
  start(): Effect.Effect<void> {
    return Effect.void
  }

  /** Publishes `Stopped` with the pool's counters. */
  stop(): Effect.Effect<void> {
    return Effect.suspend(() => Effect.asVoid(this.publish({ _tag: "Stopped", counters: this.deps.counters() })))
  }

  /** Whether anyone listens to events of this tag (so callers can skip building one). */
  wants(tag: Tag): boolean {
    if (this.subscribers > 0) return true
    for (const f of this.filtered) if (f.tags.has(tag)) return true
    return false
  }

  /** Publishes the event to those who listen to it (its result, whether it was taken, is of no use). */
  readonly publish = (event: Event): Effect.Effect<unknown> => {
    if (this.filtered.size === 0) return this.subscribers > 0 ? PubSub.publish(this.events, event) : Effect.void
    const offers: Array<Effect.Effect<unknown>> = []
    if (this.subscribers > 0) offers.push(PubSub.publish(this.events, event))
    for (const f of this.filtered) if (f.tags.has(event._tag)) offers.push(Queue.offer(f.queue, event))
    return offers.length === 0 ? Effect.void : Effect.all(offers, { discard: true })
  }

  /** A subscription to every event, for the scope. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Event>, never, Scope.Scope> = Effect.zipLeft(
    Effect.suspend(() => PubSub.subscribe(this.events)),
    Effect.acquireRelease(Effect.sync(() => this.subscribers++), () => Effect.sync(() => this.subscribers--))
  )

  /**
   * A subscription to the events of these tags only, for the scope. While
   * every subscription is of this kind, the pool does not make the events
   * nobody asked for: a log of failures costs nothing per item that ran well
   * (measured with `docket worker`: a subscription to every event, three per
   * item, halved its drain).
   */
  readonly subscribeTo = <T extends Tag>(
    tags: ReadonlyArray<T>
  ): Effect.Effect<Queue.Dequeue<Extract<Event, { readonly _tag: T }>>, never, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.map(Queue.sliding<Event>(4096), (queue) => {
        const f: Filtered = { tags: new Set<Tag>(tags), queue }
        this.filtered.add(f)
        return f
      }),
      (f) => Effect.zipRight(Effect.sync(() => this.filtered.delete(f)), Queue.shutdown(f.queue))
    ).pipe(
      // Only events of these tags are offered to the queue.
      Effect.map((f) => f.queue as unknown as Queue.Dequeue<Extract<Event, { readonly _tag: T }>>)
    )

  private readonly storageLog = new StorageErrorLog()

  /**
   * Logs (rate-limited: `StorageErrorLog`) and publishes a failed storage
   * operation (the pool goes on and retries). Every failure is published.
   */
  readonly storageFailed = (operation: string) => (error: StorageError | InvalidInput): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const note = this.storageLog.failed(operation, now)
      const publish = this.publish({ _tag: "StorageFailed", operation, error: error.message })
      return note === undefined ? publish : Effect.zipRight(Effect.logWarning(`docket: ${operation} failed${note}`, error.message), publish)
    })

  /** The operation worked: after failures, one line says so (nothing otherwise). */
  readonly storageWorked = (operation: string): Effect.Effect<void> =>
    this.storageLog.failing(operation)
      ? Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const line = this.storageLog.worked(operation, now)
        return line === undefined ? Effect.void : Effect.logWarning(line)
      })
      : Effect.void
}

/** The events part, with no subscriber yet. */
export const make = (deps: PublisherDeps): Effect.Effect<Publisher> =>
  Effect.map(PubSub.sliding<Event>(4096), (events) => new Publisher(events, deps))

/** How often a storage operation that keeps failing is logged again. */
export const STORAGE_LOG_PERIOD_MS = 10_000

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

/**
 * The rate limit of storage-error log lines, per operation: a database that
 * is down or a disk that is full fails every claim, write and renewal, and a
 * line for each (several a second per pool) would bury everything else. The
 * first failure of an operation is logged at once; while it keeps failing, at
 * most one line per period, with the count of failures not logged since; when
 * it works again (for the operations whose callers say so: `worked`), one
 * line with the count and the time it failed for. A failure after two
 * periods without one starts afresh (logged at once).
 */
export class StorageErrorLog {
  private readonly operations = new Map<
    string,
    { since: number; loggedAt: number; lastAt: number; unlogged: number; total: number }
  >()

  constructor(private readonly periodMs = STORAGE_LOG_PERIOD_MS) {}

  /** Whether the operation's last outcome was a failure. */
  failing(operation: string): boolean {
    return this.operations.has(operation)
  }

  /**
   * A failure at `now`: undefined when it is not to be logged (it is counted
   * for the next line), else what to add to the line ("" for the first).
   */
  failed(operation: string, now: number): string | undefined {
    const state = this.operations.get(operation)
    // A first failure, or the first after a quiet period (an operation whose
    // caller does not report its successes: a new episode).
    if (state === undefined || now - state.lastAt > 2 * this.periodMs) {
      this.operations.set(operation, { since: now, loggedAt: now, lastAt: now, unlogged: 0, total: 1 })
      return ""
    }
    state.total++
    state.lastAt = now
    if (now - state.loggedAt < this.periodMs) {
      state.unlogged++
      return undefined
    }
    const note = ` (${state.unlogged} more failures not logged in the last ${seconds(now - state.loggedAt)}; failing for ${
      seconds(now - state.since)
    }, logged at most once per ${seconds(this.periodMs)})`
    state.loggedAt = now
    state.unlogged = 0
    return note
  }

  /** A success at `now`: after failures, the line that says it works again. */
  worked(operation: string, now: number): string | undefined {
    const state = this.operations.get(operation)
    if (state === undefined) return undefined
    this.operations.delete(operation)
    return `docket: ${operation} works again, after ${state.total} failures in ${seconds(now - state.since)}`
  }
}
