/** Messages between the harness and its worker child processes (Node IPC). */
import type { Mode, Target } from "../adapters/types.js"

export interface ChildConfig {
  readonly contender: string
  readonly target: Target
  readonly concurrency: number
  readonly mode: Mode
  /** Jobs this run expects in total (over all processes). */
  readonly expect: number
  /** Record each run's start time (W3). */
  readonly recordStarts: boolean
  readonly projectDir: string
}

export type ToChild =
  | { readonly type: "go" }
  /** W3 in-process: enqueue `count` jobs `intervalMs` apart from inside the worker process. */
  | { readonly type: "series"; readonly count: number; readonly intervalMs: number }
  | { readonly type: "stop" }

export interface ChildResult {
  /** Payload indexes whose handler succeeded, in order. */
  readonly seen: ReadonlyArray<number>
  /** Attempts that failed on purpose (W4). */
  readonly failures: number
  readonly firstStart: number
  readonly lastEnd: number
  /** Enqueue-to-start of each job, ms (W3). */
  readonly latencies: ReadonlyArray<number>
  /** [payload index, handler start] of each successful run (W3 only). */
  readonly starts: ReadonlyArray<readonly [number, number]>
  /** [payload index, when its enqueue call returned] (W3 in-process series only). */
  readonly returned: ReadonlyArray<readonly [number, number]>
  /** [start (epoch ms), duration ms] of each GC pause while the worker ran (W3 only). */
  readonly gcPauses: ReadonlyArray<readonly [number, number]>
  /** [start (epoch ms), length ms] of each event-loop stall over 2 ms, seen by a 10 ms timer (W3 only). */
  readonly loopStalls: ReadonlyArray<readonly [number, number]>
  readonly peakRssKb: number
  /** RSS once the library was loaded, before its worker started. */
  readonly loadedRssKb: number
  /** V8 heap and external memory (MB) at the sample with the highest RSS. */
  readonly heapAtPeak: { readonly heapUsed: number; readonly heapTotal: number; readonly external: number }
  readonly sampledRssMaxKb: number
  readonly loopDelayMaxMs: number
  readonly loopDelayP99Ms: number
  /** CPU time (user + system) of this process from its worker's start to `stop`, ms. */
  readonly cpuMs: number
  /** CPU time spent starting the worker (from `go` until it reported started), ms. */
  readonly startCpuMs: number
  /** From `go` to the worker reporting it started. */
  readonly startMs: number
  readonly stopMs: number
  readonly statements: number
  /** [statement text (start), count, total ms] of the most frequent statements. */
  readonly topStatements: ReadonlyArray<readonly [string, number, number]>
  readonly libStats: Record<string, number> | null
}

export type FromChild =
  | { readonly type: "loaded" }
  | { readonly type: "started" }
  | { readonly type: "progress"; readonly done: number; readonly failures: number }
  | { readonly type: "series-done" }
  | { readonly type: "result"; readonly result: ChildResult }
  | { readonly type: "error"; readonly message: string }

/**
 * Milliseconds with sub-millisecond precision, comparable across processes:
 * the system's monotonic clock (CLOCK_MONOTONIC on Linux, one clock for every
 * process). Not `performance.timeOrigin + performance.now()`: each process
 * fixes its timeOrigin from the wall clock when it starts, and here two
 * processes' origins were seen hundreds of ms apart (a W2 run with two
 * worker processes measured its drain as ending before it began: a negative
 * rate, in 2 of 80 runs).
 */
export const now = (): number => Number(process.hrtime.bigint()) / 1e6

/** A time of this process's performance timeline (a PerformanceEntry's) on `now`'s clock. */
export const fromPerformance = (t: number): number => now() - (performance.now() - t)
