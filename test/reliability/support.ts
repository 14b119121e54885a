/**
 * Shared pieces of the reliability suite: the figures it prints, worker
 * processes (`node bin/docket.mjs worker`, never npx: signals must reach the
 * worker), a private PostgreSQL cluster that a scenario may restart, and small
 * process probes (RSS).
 *
 * Every wait is on an observable condition (a row count, an output line, a
 * process exit) and bounded.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { BIN, ROOT } from "../support/cli.js"
import { IN_CI } from "../support/db.js"

export { IN_CI }

/** Where the task files of the worker processes are. */
export const FIXTURES = fileURLToPath(new URL("../fixtures/reliability/", import.meta.url))
export const fixture = (...parts: Array<string>) => join(FIXTURES, ...parts)

/**
 * RELIABILITY_SCALE multiplies the job counts of the issue (5,000 for the kill
 * scenario, 100,000 for the soak, ...). Default 1: the full figures.
 */
export const SCALE = (() => {
  const raw = process.env.RELIABILITY_SCALE
  if (raw === undefined || raw.trim() === "") return 1
  const n = Number(raw)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`RELIABILITY_SCALE must be a positive number (got ${raw})`)
  return n
})()
export const scaled = (n: number, min = 1) => Math.max(min, Math.round(n * SCALE))

// --- figures ---

export type Figures = Record<string, number | string | boolean>
const results: Array<{ scenario: string; figures: Figures }> = []

/** Prints one scenario's figures as a `RELIABILITY:` line (and keeps them for the summary). */
export const report = (scenario: string, figures: Figures) => {
  results.push({ scenario, figures })
  const text = Object.entries(figures).map(([k, v]) => `${k}=${v}`).join(" ")
  console.log(`RELIABILITY: ${scenario}: ${text}`)
}

/** Prints every scenario's figures again, at the end of the suite. */
export const printSummary = () => {
  if (results.length === 0) return
  const lines = ["RELIABILITY: summary (RELIABILITY_SCALE=" + SCALE + ")"]
  for (const { figures, scenario } of results) {
    lines.push(`RELIABILITY:   ${scenario}: ${Object.entries(figures).map(([k, v]) => `${k}=${v}`).join(" ")}`)
  }
  console.log(lines.join("\n"))
}

// --- waiting ---

export const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Polls `condition` until it holds, or throws after `timeoutMs` naming what was awaited. */
export const waitFor = async (
  what: string,
  condition: () => Promise<boolean> | boolean,
  timeoutMs: number,
  everyMs = 100
): Promise<void> => {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    if (await condition()) return
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`)
    await delay(everyMs)
  }
}

// --- worker processes ---

export interface WorkerProcess {
  readonly child: ChildProcess
  readonly pid: number
  /** The worker's name (from its "started" line), once it has started. */
  name: string | undefined
  readonly startedAt: number
  /** The last lines of its stdout and stderr (bounded: a soak prints a line per event). */
  readonly tail: () => string
  /** Resolves when the worker has printed its "started" line; rejects if it exits first or after the timeout. */
  readonly ready: (timeoutMs?: number) => Promise<string>
  /** Resolves when `pattern` appears in a line of stdout (lines seen before the call count). */
  readonly waitForLine: (pattern: RegExp, timeoutMs?: number) => Promise<string>
  /** The stdout lines kept (the `keep` option, and the "started" line). */
  readonly kept: Array<string>
  /** Counts stdout lines matching a pattern given at start (`count` option). */
  readonly counted: () => number
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly alive: () => boolean
}

export interface WorkerOptions {
  readonly database: string
  readonly tasks: string
  readonly args?: ReadonlyArray<string>
  readonly env?: Record<string, string | undefined>
  /** Arguments for node itself, before bin/docket.mjs (e.g. `--import <preload>`). */
  readonly nodeArgs?: ReadonlyArray<string>
  /** Keep every stdout line (and stderr line, as `stderr: <line>`) matching this (default: none, only the tail). */
  readonly keep?: RegExp
  /** Count stdout lines matching this. */
  readonly count?: RegExp
  /** Pass --log-items (a line per started and done item, which the scenarios wait for); default true. */
  readonly logItems?: boolean
  /**
   * Run this TypeScript program (under tsx) instead of `docket worker`: an
   * application's own worker process (the workflow scenario's). It gets the
   * database as DOCKET_DATABASE_URL and `args`, and prints the same
   * "docket worker <name> started on" line when its pool runs.
   */
  readonly script?: string
}

const STARTED = /^docket worker (\S+) started on /

/** Starts `docket worker` as a child process. */
export const startWorker = (options: WorkerOptions): WorkerProcess => {
  const env: Record<string, string | undefined> = { ...process.env, DOCKET_DATABASE_URL: undefined, ...options.env }
  for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key]
  if (options.script !== undefined) env.DOCKET_DATABASE_URL = options.database
  const command = options.script !== undefined
    ? ["--import", "tsx", options.script, ...(options.args ?? [])]
    : [BIN, "worker", "--database", options.database, "--tasks", options.tasks, ...(options.logItems === false ? [] : ["--log-items"]), ...(options.args ?? [])]
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), ...command],
    { cwd: ROOT, env: env as NodeJS.ProcessEnv, stdio: ["ignore", "pipe", "pipe"] }
  )
  const tail: Array<string> = []
  const kept: Array<string> = []
  let counted = 0
  let partial = ""
  const listeners = new Set<(line: string) => void>()
  const push = (line: string) => {
    tail.push(line)
    if (tail.length > 60) tail.shift()
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on("close", (code, signal) => resolve({ code, signal }))
  })
  const worker: WorkerProcess = {
    child,
    pid: child.pid!,
    name: undefined,
    startedAt: Date.now(),
    kept,
    tail: () => tail.join("\n"),
    counted: () => counted,
    exited,
    alive: () => child.exitCode === null && child.signalCode === null,
    ready: (timeoutMs = 30_000) =>
      worker.name !== undefined
        ? Promise.resolve(worker.name)
        : worker.waitForLine(STARTED, timeoutMs).then(() => worker.name!),
    waitForLine: (pattern, timeoutMs = 30_000) =>
      new Promise<string>((resolve, reject) => {
        const seen = kept.find((l) => pattern.test(l))
        if (seen !== undefined) return resolve(seen)
        const timer = setTimeout(() => {
          listeners.delete(listener)
          reject(new Error(`worker ${child.pid}: no line matching ${pattern} within ${timeoutMs} ms\n${worker.tail()}`))
        }, timeoutMs)
        const listener = (line: string) => {
          if (!pattern.test(line)) return
          clearTimeout(timer)
          listeners.delete(listener)
          resolve(line)
        }
        listeners.add(listener)
        void exited.then(({ code, signal }) => {
          if (!listeners.has(listener)) return
          clearTimeout(timer)
          listeners.delete(listener)
          reject(new Error(`worker ${child.pid} exited (${code ?? signal}) before a line matching ${pattern}\n${worker.tail()}`))
        })
      })
  }
  child.stdout!.setEncoding("utf8").on("data", (data: string) => {
    const parts = (partial + data).split("\n")
    partial = parts.pop()!
    for (const line of parts) {
      push(line)
      const started = STARTED.exec(line)
      if (started !== null) worker.name = started[1]
      if (options.keep?.test(line) || started !== null) kept.push(line)
      if (options.count?.test(line)) counted++
      for (const listener of [...listeners]) listener(line)
    }
  })
  child.stderr!.setEncoding("utf8").on("data", (data: string) => {
    for (const line of data.split("\n")) {
      if (line.trim() === "") continue
      push(`stderr: ${line}`)
      if (options.keep?.test(line)) kept.push(`stderr: ${line}`)
    }
  })
  return worker
}

/** Stops a worker with SIGTERM (graceful) and waits for it, SIGKILL after `timeoutMs`. */
export const stopWorker = async (worker: WorkerProcess, timeoutMs = 20_000) => {
  if (!worker.alive()) return worker.exited
  worker.child.kill("SIGTERM")
  const timer = setTimeout(() => worker.child.kill("SIGKILL"), timeoutMs)
  const result = await worker.exited
  clearTimeout(timer)
  return result
}

/** SIGKILLs a worker and waits until it is gone. */
export const killWorker = async (worker: WorkerProcess) => {
  if (worker.alive()) worker.child.kill("SIGKILL")
  return worker.exited
}

/** Resident set size of a process, in MB (from /proc). */
export const rssMb = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(status)
  if (match === null) throw new Error(`no VmRSS for ${pid}`)
  return Math.round(Number(match[1]) / 1024)
}

// --- PostgreSQL helpers ---

/** A small pool on a database URL, for the test's own queries. */
export const pgPool = (url: string) => {
  const pool = new pg.Pool({ connectionString: url, max: 3, connectionTimeoutMillis: 5000 })
  // A server restart drops idle connections: not an error of the test.
  pool.on("error", () => {})
  return pool
}

export const pgCount = async (pool: pg.Pool, text: string, params: Array<unknown> = []) =>
  Number((await pool.query<{ n: string }>(text, params)).rows[0].n)

/**
 * The driver of the kill and rolling-restart scenarios: until the queue table
 * is empty (at most 240 s), every `everyMs` it hands a random worker to `act`,
 * among those that have started, but only while at least two have (so the
 * drain always moves: a new worker takes 1-4 s to start on a busy 2-core
 * machine). Returns how many ticks acted and how many were skipped.
 */
export const driveUntilDrained = async (options: {
  readonly pool: pg.Pool
  readonly live: ReadonlySet<WorkerProcess>
  readonly everyMs: number
  readonly act: (victim: WorkerProcess) => Promise<void> | void
}): Promise<{ readonly acted: number; readonly skippedTicks: number }> => {
  let acted = 0
  let skippedTicks = 0
  const deadline = performance.now() + 240_000
  let next = performance.now() + options.everyMs
  for (;;) {
    // Done items are kept (the default retention): what is left to drain is the rest.
    const remaining = await pgCount(options.pool, "SELECT count(*) AS n FROM docket_items WHERE state <> 'done'")
    if (remaining === 0) return { acted, skippedTicks }
    if (performance.now() > deadline) {
      throw new Error(`the queue did not drain within 240 s: ${remaining} items left, ${acted} workers acted on`)
    }
    if (performance.now() >= next) {
      next += options.everyMs
      const candidates = [...options.live].filter((w) => w.name !== undefined && w.alive())
      if (candidates.length < 2) {
        skippedTicks++
      } else {
        acted++
        await options.act(candidates[Math.floor(Math.random() * candidates.length)])
      }
    }
    await delay(50)
  }
}

/** The URL of another database on the same server. */
export const withDatabase = (url: string, database: string) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/** A PostgreSQL cluster of a scenario's own, which it may stop and start (test/support/cluster.ts). */
export { type Cluster as PrivateCluster, type ClusterOptions, privateCluster } from "../support/cluster.js"
