/**
 * The pool's options, checked and resolved to numbers once.
 */
import { Duration } from "effect"
import { hostname } from "node:os"

/** A worker name: host:pid plus a short random part (two processes never share one). */
export const defaultName = (): string => `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`

/** The resolved options. */
export interface Config {
  readonly id: string
  readonly concurrency: number
  readonly prefetch: number
  readonly leaseMs: number
  readonly pollMs: number
  readonly graceMs: number
  /** How long a prefetched item may wait for a slot (at most a third of the lease). */
  readonly holdMs: number
  readonly handledOnly: boolean
}

/** What `resolve` reads (the Worker's options without the handlers). */
export interface Input {
  readonly concurrency?: number | undefined
  readonly prefetch?: number | undefined
  readonly prefetchHold?: Duration.DurationInput | undefined
  readonly lease?: Duration.DurationInput | undefined
  readonly poll?: Duration.DurationInput | undefined
  readonly grace?: Duration.DurationInput | undefined
  readonly worker?: string | undefined
  readonly claimKinds?: "all" | "handled" | undefined
}

const millis = (input: Duration.DurationInput) => Duration.toMillis(Duration.decode(input))

// A programming error in the application (thrown while the pool is built).
const checkInt = (name: string, value: number, min: number) => {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new Error(`Docket worker: ${name} must be an integer >= ${min} (got ${value})`)
  }
  return value
}

/** The options with their defaults; a bad concurrency or prefetch throws. */
export const resolve = (options: Input): Config => {
  const leaseMs = millis(options.lease ?? "30 seconds")
  return {
    id: options.worker ?? defaultName(),
    concurrency: checkInt("concurrency", options.concurrency ?? 10, 1),
    prefetch: checkInt("prefetch", options.prefetch ?? 8000, 0),
    leaseMs,
    pollMs: millis(options.poll ?? "2 seconds"),
    graceMs: millis(options.grace ?? "10 seconds"),
    holdMs: Math.min(millis(options.prefetchHold ?? "1 second"), leaseMs / 3),
    handledOnly: options.claimKinds !== "all"
  }
}
