/**
 * The groups benchmark's worker processes (bench/lib/groupChild.ts, forked
 * under tsx) and the checks made on what their handlers recorded: every item
 * ran once, and per group, runs started in enqueue order and never
 * overlapped more than the group's limit allows.
 */
import { type ChildProcess, fork } from "node:child_process"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { GroupChildConfig, GroupFromChild, GroupToChild } from "./groupProtocol.js"

const here = dirname(fileURLToPath(import.meta.url))
const PROJECT_DIR = join(here, "..", "..")

interface Child {
  readonly process: ChildProcess
  loaded: boolean
  started: boolean
  done: number
  marked: number
  result: { readonly records: ReadonlyArray<number>; readonly latencies: ReadonlyArray<number> } | undefined
  output: string
}

export class GroupWorkers {
  private readonly children: Array<Child> = []
  private failure: Error | undefined
  private readonly listeners = new Set<() => void>()

  static async start(procs: number, config: GroupChildConfig): Promise<GroupWorkers> {
    const workers = new GroupWorkers()
    for (let n = 0; n < procs; n++) {
      const proc = fork(join(here, "groupChild.ts"), [JSON.stringify(config)], {
        cwd: PROJECT_DIR,
        execArgv: ["--import", "tsx"],
        stdio: ["ignore", "pipe", "pipe", "ipc"],
        env: { ...process.env, NODE_ENV: "production" }
      })
      const child: Child = { process: proc, loaded: false, started: false, done: 0, marked: 0, result: undefined, output: "" }
      const keep = (chunk: Buffer) => {
        child.output = (child.output + chunk.toString()).slice(-4000)
      }
      proc.stdout?.on("data", keep)
      proc.stderr?.on("data", keep)
      proc.on("message", (message: GroupFromChild) => workers.onMessage(child, message))
      proc.on("exit", (code) => {
        if (child.result === undefined) workers.fail(new Error(`worker process exited (${code}) before reporting:\n${child.output}`))
      })
      workers.children.push(child)
    }
    // Loading under tsx takes seconds; on this shared machine under load, over a minute was seen.
    // A process not loaded in time is ended with the others (left running, it kept the bench alive).
    await workers.waitFor(() => workers.children.every((c) => c.loaded), 180_000, "loading").catch((error) => {
      workers.kill()
      throw error
    })
    return workers
  }

  private onMessage(child: Child, message: GroupFromChild) {
    switch (message.type) {
      case "loaded":
        child.loaded = true
        break
      case "started":
        child.started = true
        break
      case "progress":
        child.done = message.done
        child.marked = message.marked
        break
      case "result":
        child.result = { records: message.records, latencies: message.latencies }
        break
      case "error":
        this.fail(new Error(`worker process failed: ${message.message}\n${child.output}`))
        break
    }
    for (const listener of [...this.listeners]) listener()
  }

  private fail(error: Error) {
    this.failure ??= error
    for (const listener of [...this.listeners]) listener()
  }

  /** Resolves when `predicate` holds (checked on every message), rejects on a failure or after `timeoutMs`. */
  waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.failure !== undefined) {
          done()
          reject(this.failure)
        } else if (predicate()) {
          done()
          resolve()
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`))
      }, timeoutMs)
      const done = () => {
        clearTimeout(timer)
        this.listeners.delete(check)
      }
      this.listeners.add(check)
      check()
    })
  }

  private send(message: GroupToChild) {
    for (const child of this.children) if (child.process.connected) child.process.send(message)
  }

  async go(): Promise<void> {
    this.send({ type: "go" })
    await this.waitFor(() => this.children.every((c) => c.started), 60_000, "workers to start")
  }

  get done(): number {
    return this.children.reduce((n, c) => n + c.done, 0)
  }

  get marked(): number {
    return this.children.reduce((n, c) => n + c.marked, 0)
  }

  /** Stops every worker gracefully; their records, all processes' together. */
  async stop(): Promise<{ readonly records: Array<number>; readonly latencies: Array<number> }> {
    this.send({ type: "stop" })
    await this.waitFor(() => this.children.every((c) => c.result !== undefined), 60_000, "workers to stop")
    return {
      records: this.children.flatMap((c) => [...c.result!.records]),
      latencies: this.children.flatMap((c) => [...c.result!.latencies])
    }
  }

  kill() {
    for (const child of this.children) if (child.process.exitCode === null) child.process.kill("SIGKILL")
  }
}

/** What the handlers' records say about a run. */
export interface Check {
  /** Runs recorded, and distinct items among them. */
  readonly runs: number
  readonly distinct: number
  /** Per group, a run that started before an item enqueued earlier (a smaller index) of its group. */
  readonly outOfOrder: number
  /** Per group, the most runs seen at once (from start to end of each). */
  readonly maxAtOnce: number
  /** From the first start to the last end, ms. */
  readonly spanMs: number
}

export const check = (records: ReadonlyArray<number>): Check => {
  const byGroup = new Map<number, Array<readonly [number, number, number]>>()
  const seen = new Set<number>()
  let first = Infinity
  let last = -Infinity
  for (let k = 0; k < records.length; k += 4) {
    const [i, g, start, end] = [records[k], records[k + 1], records[k + 2], records[k + 3]]
    seen.add(i)
    first = Math.min(first, start)
    last = Math.max(last, end)
    let runs = byGroup.get(g)
    if (runs === undefined) byGroup.set(g, runs = [])
    runs.push([i, start, end])
  }
  let outOfOrder = 0
  let maxAtOnce = 0
  for (const runs of byGroup.values()) {
    runs.sort((a, b) => a[1] - b[1])
    let highest = -Infinity
    for (const [i] of runs) {
      if (i < highest) outOfOrder++
      highest = Math.max(highest, i)
    }
    // A sweep over starts and ends (an end before a start at the same instant).
    const events = runs.flatMap(([, start, end]) => [[start, 1], [end, -1]] as const)
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
    let running = 0
    for (const [, delta] of events) {
      running += delta
      maxAtOnce = Math.max(maxAtOnce, running)
    }
  }
  return { runs: records.length / 4, distinct: seen.size, outOfOrder, maxAtOnce, spanMs: last - first }
}
