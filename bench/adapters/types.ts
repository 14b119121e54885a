/**
 * The interface every contender of the benchmark implements. One file per
 * queue library in this directory; add one to `registry.ts` to benchmark it.
 *
 * The harness uses a contender in two places:
 * - the parent process (`open`, `probe`): prepares a fresh store, enqueues,
 *   and watches the store drain;
 * - a worker child process (`startWorker`): runs the library's worker with the
 *   benchmark's handler, so the child's memory is the worker's own.
 */
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

/** Where a contender's store lives; fresh for every run. */
export type Target =
  | { readonly store: "pg"; readonly url: string; readonly database: string }
  | { readonly store: "sqlite"; readonly file: string }
  | { readonly store: "redis"; readonly url: string; readonly db: number; readonly prefix: string }

/** Every job's payload: its index in the run and when it was enqueued (epoch ms, sub-ms precision). */
export interface Payload {
  readonly i: number
  readonly t: number
}

/**
 * The benchmark's handler. Throwing (or rejecting) means the attempt failed
 * and the queue should retry the job.
 */
export type JobHandler = (payload: Payload) => void | Promise<void>

/** What a run is for: plain no-op jobs, or jobs that fail once (W4: minimal backoff, one retry allowed). */
export type Mode = "plain" | "retry"

/** The parent's handle on a store: enqueue. Close it before workers start (connection and statistics accounting). */
export interface Client {
  /** Enqueues with the library's fastest bulk API (the adapter chooses the batch size). */
  readonly enqueueBulk: (payloads: ReadonlyArray<Payload>) => Promise<void>
  /** Enqueues one job, as an application would for a single event. */
  readonly enqueueOne: (payload: Payload) => Promise<void>
  readonly close: () => Promise<void>
}

/** A cheap look at the store: how many jobs are not yet completed. */
export interface Probe {
  readonly pending: () => Promise<number>
  readonly close: () => Promise<void>
}

export interface WorkerOptions {
  readonly concurrency: number
  readonly mode: Mode
}

export interface RunningWorker {
  /** Stops gracefully (lets running jobs finish, records their outcomes). */
  readonly stop: () => Promise<void>
  /**
   * An enqueuer that shares the worker's process and client (for W3 when
   * `latencyInProcess` is set: the library's in-process wake-up).
   */
  readonly client?: Client | undefined
  /** The library's own counters, if it has any (reported in the details). */
  readonly stats?: (() => Promise<Record<string, number>>) | undefined
}

export interface Contender {
  /** Short name used on the command line (`--only docket-pg,bullmq`). */
  readonly name: string
  /** Name in the tables. */
  readonly label: string
  readonly store: Target["store"]
  /** One line: the configuration measured (shown under the tables). */
  readonly config: string
  /** What its W4 minimal backoff is. */
  readonly retryNote: string
  /** Docket itself (the others are peers). */
  readonly docket?: boolean
  /** Not a queue but a reference (the floor): shown in the tables, not a peer in the ratios or targets. */
  readonly baseline?: boolean
  /** The workloads it takes part in (default: all; W6 only with `backlog`). */
  readonly workloads?: ReadonlyArray<"W1" | "W2" | "W3" | "W4" | "W5" | "W6">
  /** W6 (big backlog): how to build one in its store straight with SQL. */
  readonly backlog?: Backlog
  /** W3: enqueue from inside the worker process (uses `RunningWorker.client`). */
  readonly latencyInProcess?: boolean
  /** Why it cannot run here, if it cannot (checked before the run). */
  readonly unavailable?: () => string | undefined
  /** Parent: a fresh store was made at `target`; install the schema and return an enqueuer. */
  readonly open: (target: Target, mode: Mode) => Promise<Client>
  readonly probe: (target: Target) => Promise<Probe>
  /** Child: start the library's worker with `handler`. */
  readonly startWorker: (target: Target, handler: JobHandler, options: WorkerOptions) => Promise<RunningWorker>
}

export interface BacklogSizes {
  /** Items waiting, due in a day (behind the due ones in claim order). */
  readonly waiting: number
  /** Finished items kept for their history (done a few minutes ago, within the retention). */
  readonly done: number
  /** Items due now, payloads { i: 0 .. due - 1 }: the ones the workers drain. */
  readonly due: number
}

export interface Backlog {
  /** Fills the store (its schema installed by `open`) with SQL, not through the library's enqueue. */
  readonly build: (target: Target, sizes: BacklogSizes) => Promise<void>
  /** Pending among the due items only (the waiting backlog stays). */
  readonly probe: (target: Target) => Promise<Probe>
  /** The claim statement's text (the worker's statement counter keys statements by it). */
  readonly claimStatement: (store: Target["store"]) => string
  /**
   * The claim statement alone, on the store as it is before the workers start:
   * median ms of a few claims of 10 items, each rolled back (undefined where it
   * is not measured).
   */
  readonly claimAlone?: (target: Target) => Promise<number | undefined>
}

/** Splits `items` into consecutive batches of at most `size`. */
export const batches = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/**
 * The installed version of package `name` as `from` resolves it. Reads its
 * package.json found above its entry point (some packages, graphile-worker
 * 0.18 among them, do not export `./package.json`).
 */
export const packageVersion = (name: string, from: string = import.meta.url): string | undefined => {
  try {
    const require = createRequire(from)
    let dir = dirname(require.resolve(name))
    for (;;) {
      const file = join(dir, "package.json")
      if (existsSync(file)) {
        const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string }
        if (pkg.name === name && pkg.version !== undefined) return pkg.version
      }
      const parent = dirname(dir)
      if (parent === dir) return undefined
      dir = parent
    }
  } catch {
    return undefined
  }
}
