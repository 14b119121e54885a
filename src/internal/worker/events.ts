/**
 * The pool's events and metrics. Events are made only while someone listens:
 * a pool with no subscriber spends nothing on them. They go into a sliding
 * buffer, so a slow subscriber loses its oldest events and never slows the pool.
 */
import { Effect, Metric, MetricBoundaries, PubSub, type Queue, type Scope } from "effect"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type { Event } from "../../Events.js"

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

/** Publishes the pool's events to its subscribers. */
export class Publisher {
  private subscribers = 0
  private constructor(private readonly events: PubSub.PubSub<Event>) {}

  static readonly make: Effect.Effect<Publisher> = Effect.map(PubSub.sliding<Event>(4096), (events) => new Publisher(events))

  /** Whether anyone listens (so callers can skip building an event). */
  get active(): boolean {
    return this.subscribers > 0
  }

  /** Publishes the event if anyone listens (its result, whether it was taken, is of no use). */
  readonly publish = (event: Event): Effect.Effect<unknown> =>
    this.subscribers > 0 ? PubSub.publish(this.events, event) : Effect.void

  /** A subscription for the scope. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Event>, never, Scope.Scope> = Effect.zipLeft(
    Effect.suspend(() => PubSub.subscribe(this.events)),
    Effect.acquireRelease(Effect.sync(() => this.subscribers++), () => Effect.sync(() => this.subscribers--))
  )

  /** Logs and publishes a failed storage operation (the pool goes on and retries). */
  readonly storageFailed = (operation: string) => (error: StorageError | InvalidInput): Effect.Effect<void> =>
    Effect.zipRight(
      Effect.logWarning(`docket: ${operation} failed`, error.message),
      this.publish({ _tag: "StorageFailed", operation, error: error.message })
    )
}
