/**
 * The pool's options, checked and resolved to numbers once.
 */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import { hostname } from "node:os"
import type { HorizonThreshold } from "../../Domain.js"
import * as Horizon from "../horizon.js"
import { HEARTBEAT_DEFAULT_MS, HEARTBEAT_MAX_MS, HEARTBEAT_MIN_MS } from "../liveness.js"

/** A worker name: host:pid plus a short random part (two processes never share one). */
export const defaultName = (): string => `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`

/** How a pool watches the xmin horizon: the threshold and the period. */
export interface WatchConfig extends Horizon.Resolved {
  readonly everyMs: number
}

/** The resolved options. */
export interface Config {
  readonly id: string
  readonly concurrency: number
  readonly transactions: number
  readonly prefetch: number
  readonly leaseMs: number
  readonly pollMs: number
  readonly graceMs: number
  /** How long a prefetched item may wait for a slot (at most a third of the lease). */
  readonly holdMs: number
  readonly handledOnly: boolean
  /** How often the pool prunes finished items past their retention; null: never. */
  readonly pruneMs: number | null
  /** How often the pool heartbeats in the live-workers table. */
  readonly heartbeatMs: number
  /** How the pool watches the xmin horizon (PostgreSQL); null: it does not. */
  readonly horizon: WatchConfig | null
}

/**
 * How a pool runs its handlers: the Worker's options besides the handlers,
 * spans and LISTEN (`Worker.Options` extends this; `resolve` reads it).
 */
export interface PoolOptions {
  /** Handlers running at once in this process (default 10). */
  readonly concurrency?: number | undefined
  /**
   * Runs of `transactional` handlers at once in this pool (default 4; the
   * others wait in their slots, their leases renewed). Each holds one of the
   * database pool's connections (10 by default, `Database.Options.maxConnections`)
   * for its run: keep this below it, so that claims, lease renewals and
   * outcomes always find one.
   */
  readonly transactions?: number | undefined
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
  /**
   * How long a prefetched item may wait for a slot before it is released
   * (default 1 s), from the claim's return; an item a free slot takes next is kept.
   */
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
   * "handled" (default): claim only the kinds with a handler in this pool, so
   * several applications (or worker fleets) can share one queue, each running
   * its own kinds, as graphile-worker and pg-boss do. "all": claim every kind,
   * and an item of a kind with no handler here is dead at once (the
   * reference's behaviour, for a single application that owns the queue).
   */
  readonly claimKinds?: "all" | "handled" | undefined
  /**
   * How often the pool heartbeats in the live-workers table (`docket
   * workers`): from 50 ms to 5 s, default 5 s. Not longer: a pool silent for
   * 15 s is shown as gone, whatever its interval.
   */
  readonly heartbeat?: Duration.DurationInput | undefined
  /**
   * How often the pool deletes finished items whose retention has passed
   * (`QueueRepo.Options.retention`): default every minute (with jitter), the
   * first pass soon after start. `false`: this pool never prunes (another
   * process must, or done items pile up).
   */
  readonly pruneEvery?: Duration.DurationInput | false | undefined
  /**
   * On PostgreSQL, the pool checks once a period (`every`, default 1 minute)
   * who holds back the xmin horizon of the queue's database past the
   * threshold (`QueueRepo.horizon`: a transaction open longer than `age`,
   * default 5 minutes; a slot's or standby's xmin older than `transactions`,
   * default 100,000) and logs one warning per period naming them while it is
   * held, and one line when it ends (docs/operations.md). `false`: never.
   * Nothing on SQLite.
   */
  readonly horizon?: (HorizonThreshold & { readonly every?: Duration.DurationInput | undefined }) | false | undefined
}

const millis = (input: Duration.DurationInput) => Duration.toMillis(Duration.decode(input))

// A programming error in the application (thrown while the pool is built).
const checkInt = (name: string, value: number, min: number) => {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new Error(`Docket worker: ${name} must be an integer >= ${min} (got ${value})`)
  }
  return value
}

const checkMillisIn = (name: string, ms: number, min: number, max: number) => {
  if (!(ms >= min && ms <= max)) throw new Error(`Docket worker: ${name} must be from ${min} to ${max} ms (got ${ms})`)
  return ms
}

const DAY_MS = 24 * 3600 * 1000

const horizonOf = (option: PoolOptions["horizon"]): WatchConfig | null => {
  if (option === false) return null
  const threshold = Horizon.resolve(option)
  if (Either.isLeft(threshold)) throw new Error(`Docket worker: horizon ${threshold.left.reason}`)
  return { ...threshold.right, everyMs: checkMillisIn("horizon.every", millis(option?.every ?? "1 minute"), 1, DAY_MS) }
}

/** The options with their defaults; a bad concurrency, prefetch, heartbeat or horizon throws. */
export const resolve = (options: PoolOptions): Config => {
  const leaseMs = millis(options.lease ?? "30 seconds")
  return {
    id: options.worker ?? defaultName(),
    concurrency: checkInt("concurrency", options.concurrency ?? 10, 1),
    transactions: checkInt("transactions", options.transactions ?? 4, 1),
    prefetch: checkInt("prefetch", options.prefetch ?? 8000, 0),
    leaseMs,
    pollMs: millis(options.poll ?? "2 seconds"),
    graceMs: millis(options.grace ?? "10 seconds"),
    holdMs: Math.min(millis(options.prefetchHold ?? "1 second"), leaseMs / 3),
    handledOnly: options.claimKinds !== "all",
    pruneMs: options.pruneEvery === false
      ? null
      : checkMillisIn("pruneEvery", millis(options.pruneEvery ?? "1 minute"), 1, DAY_MS),
    heartbeatMs: checkMillisIn(
      "heartbeat",
      millis(options.heartbeat ?? HEARTBEAT_DEFAULT_MS),
      HEARTBEAT_MIN_MS,
      HEARTBEAT_MAX_MS
    ),
    horizon: horizonOf(options.horizon)
  }
}
