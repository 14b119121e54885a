/**
 * The failover scenario's shared pieces (failover.ts, failoverAsync.ts): a
 * primary with a streaming standby, the runs the task recorded in files
 * (fixtures/reliability/failover/rel.fail.mts), and whether two runs of an
 * item overlapped.
 */
import { Effect, type ManagedRuntime } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Cluster, clusterAvailable, privateStandby } from "../support/cluster.js"
import { IN_CI, privateCluster, type WorkerProcess } from "./support.js"

/** The standby's replication slot, and its receiver's application_name. */
export const SLOT = "failover_standby"
export const KIND = "rel.fail"

/** A run as the handlers recorded it (fixtures/reliability/failover/rel.fail.mts). */
export interface Run {
  readonly pid: number
  readonly itemId: number
  readonly job: number
  readonly startedAt: number
  readonly endedAt: number | null
  readonly aborted: boolean
}

/** Every run in the handlers' files (runs-<pid>.log in `dir`). */
export const readRuns = (dir: string): Array<Run> => {
  const runs: Array<Run> = []
  for (const file of readdirSync(dir).filter((f) => /^runs-\d+\.log$/.test(f))) {
    const pid = Number(/\d+/.exec(file)![0])
    const open = new Map<string, Omit<Run, "endedAt" | "aborted">>()
    const ends = new Map<string, { at: number; aborted: boolean }>()
    for (const line of readFileSync(join(dir, file), "utf8").split("\n")) {
      const f = line.split(" ")
      if (f[0] === "S") open.set(f[1], { pid, itemId: Number(f[2]), job: Number(f[3]), startedAt: Number(f[5]) })
      if (f[0] === "E") ends.set(f[1], { at: Number(f[3]), aborted: f[2] === "aborted" })
    }
    for (const [run, start] of open) {
      const end = ends.get(run)
      runs.push({ ...start, endedAt: end?.at ?? null, aborted: end?.aborted ?? false })
    }
  }
  return runs.sort((a, b) => a.startedAt - b.startedAt)
}

/** Runs started and not ended, now. */
export const runsOpen = (dir: string): number => readRuns(dir).filter((r) => r.endedAt === null).length

/** Pairs of runs of one item that overlap in time (a run without an end overlaps whatever follows it). */
export const overlapping = (runs: ReadonlyArray<Run>): Array<readonly [Run, Run]> => {
  const byItem = new Map<number, Array<Run>>()
  for (const r of runs) byItem.set(r.itemId, [...(byItem.get(r.itemId) ?? []), r])
  const pairs: Array<readonly [Run, Run]> = []
  for (const list of byItem.values()) {
    for (let i = 1; i < list.length; i++) {
      const end = list[i - 1].endedAt
      if (end === null || end > list[i].startedAt) pairs.push([list[i - 1], list[i]])
    }
  }
  return pairs
}

/** A primary with a streaming standby, its database `docket_rel` made; both destroyed on failure. */
export const makePair = async (): Promise<{ primary: Cluster; standby: Cluster } | undefined> => {
  let primary: Cluster | undefined
  try {
    if (!clusterAvailable) throw new Error("no PostgreSQL server binaries")
    primary = await privateCluster()
    await primary.query((c) => c.query("CREATE DATABASE docket_rel"))
    const standby = await privateStandby(primary, SLOT, { wal_receiver_status_interval: "1s" })
    return { primary, standby }
  } catch (error) {
    await primary?.destroy()
    if (IN_CI) throw error
    console.warn(`RELIABILITY: failover scenario skipped: cannot make a primary and a standby (${String(error)})`)
    return undefined
  }
}

export type Repo = ManagedRuntime.ManagedRuntime<QueueRepo.QueueRepo, unknown>
// RELIABILITY_DEBUG: when each phase of a case ended, and what the workers
// logged (but each started and done item), in ms from the case's start.
let debugStart = Date.now()
const debug = (line: string) => console.log(`failover: ${Date.now() - debugStart} ms: ${line}`)

/** A case's phase logger (RELIABILITY_DEBUG): its start is the case's start. */
export const phases = () => {
  debugStart = Date.now()
  return (name: string) => {
    if (process.env.RELIABILITY_DEBUG) debug(name)
  }
}

/** Echoes what a worker logs (RELIABILITY_DEBUG), but its started and done lines. */
export const echo = (worker: WorkerProcess) => {
  const lines = (stream: string) => (data: string) => {
    for (const line of String(data).split("\n")) {
      if (line.trim() !== "" && !/ (started|done) /.test(line)) debug(`${worker.pid} ${stream}${line}`)
    }
  }
  worker.child.stdout?.on("data", lines(""))
  worker.child.stderr?.on("data", lines("stderr: "))
}

export const withRepo = <A, E>(runtime: Repo, f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) =>
  runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, f))

