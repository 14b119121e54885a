/**
 * The groups benchmark's workloads (issue 36), one run each on a fresh store:
 *
 * - W7 sequences: `groups` x `perGroup` items enqueued interleaved (each
 *   group's k-th item after every group's (k-1)-th), then drained by `procs`
 *   worker processes of `slots` each, one at a time per group in enqueue order.
 * - W8 fairness: one big group's `big` items enqueued; the workers started;
 *   a second later `small` groups x `smallEach` items enqueued at once; the
 *   enqueue-to-start latency of those, and how far the big group had got when
 *   the last of them started.
 * - G6 backlog (Docket only): `backlog` waiting items due now in
 *   `backlogGroups` groups (ordered, concurrency 1), built with SQL; the
 *   first `drain` of them drained. The baseline is the same with no groups
 *   (W2's kind of drain, over the same table).
 */
import Database from "better-sqlite3"
import { loadavg } from "node:os"
import pg from "pg"
import { type GroupLimit, type GroupPayload, type GroupSystemName, loadGroupSystem } from "../adapters/groups.js"
import type { Target } from "../adapters/types.js"
import type { GroupChildConfig } from "./groupProtocol.js"
import { check, type Check, GroupWorkers } from "./groupWorkers.js"
import { now } from "./protocol.js"
import { percentile } from "./stats.js"
import { dropTarget, type Env, freshTarget } from "./stores.js"

export interface GroupSizes {
  readonly groups: number
  readonly perGroup: number
  readonly slots: number
  readonly big: number
  readonly small: number
  readonly smallEach: number
  readonly backlog: number
  readonly backlogGroups: number
  readonly drain: number
}

export const DEFAULT_GROUP_SIZES: GroupSizes = {
  groups: 1000,
  perGroup: 20,
  slots: 10,
  big: 100_000,
  small: 20,
  smallEach: 10,
  backlog: 1_000_000,
  backlogGroups: 100_000,
  drain: 50_000
}

export const QUICK_GROUP_SIZES: GroupSizes = {
  groups: 20,
  perGroup: 5,
  slots: 10,
  big: 500,
  small: 4,
  smallEach: 3,
  backlog: 2_000,
  backlogGroups: 200,
  drain: 300
}

export const SEQUENCE: GroupLimit = { concurrency: 1, ordered: true }

export interface GroupSample {
  readonly workload: "W7" | "W8" | "G6"
  readonly system: GroupSystemName | "docket-ungrouped"
  readonly store: "pg" | "sqlite"
  readonly procs: number
  readonly limit: GroupLimit
  readonly load: number
  readonly rate?: number | undefined
  readonly check?: Check | undefined
  readonly expected?: number | undefined
  readonly latency?: { readonly p50: number; readonly p99: number; readonly max: number; readonly n: number } | undefined
  /** W8: the big group's items done when the last small one started, as a fraction of it. */
  readonly bigThrough?: number | undefined
  readonly error?: string | undefined
}

const DRAIN_TIMEOUT_MS = 600_000
const W8_TIMEOUT_MS = 180_000

const withStore = async <A>(env: Env, store: "pg" | "sqlite", name: string, f: (target: Target) => Promise<A>): Promise<A> => {
  const target = await freshTarget(env, store, name, "benchg")
  try {
    return await f(target)
  } finally {
    await dropTarget(env, target)
  }
}

/** Runs `body` with `procs` workers started; always stops or kills them. */
const withWorkers = async (
  procs: number,
  config: GroupChildConfig,
  body: (workers: GroupWorkers) => Promise<void>
) => {
  const workers = await GroupWorkers.start(procs, config)
  try {
    await workers.go()
    await body(workers)
    return await workers.stop()
  } catch (error) {
    workers.kill()
    throw error
  }
}

const failed = (base: Omit<GroupSample, "error">, error: unknown): GroupSample => ({
  ...base,
  error: error instanceof Error ? error.message.split("\n")[0] : String(error)
})

export const runW7 = async (env: Env, name: GroupSystemName, store: "pg" | "sqlite", procs: number, sizes: GroupSizes): Promise<GroupSample> => {
  const base = { workload: "W7" as const, system: name, store, procs, limit: SEQUENCE, load: loadavg()[0] }
  const expected = sizes.groups * sizes.perGroup
  try {
    return await withStore(env, store, `w7_${name}`, async (target) => {
      const system = loadGroupSystem(name)
      const client = await system.open(target, SEQUENCE)
      const payloads: Array<GroupPayload> = []
      for (let k = 0; k < sizes.perGroup; k++) {
        for (let g = 0; g < sizes.groups; g++) payloads.push({ i: k * sizes.groups + g, g, t: 0 })
      }
      await client.enqueueBulk(payloads)
      await client.close()
      const { records } = await withWorkers(
        procs,
        { system: name, target, concurrency: sizes.slots, limit: SEQUENCE, markFrom: Infinity },
        (workers) => workers.waitFor(() => workers.done >= expected, DRAIN_TIMEOUT_MS, `${expected} items`)
      )
      const c = check(records)
      return { ...base, expected, check: c, rate: c.runs / (c.spanMs / 1000) }
    })
  } catch (error) {
    return failed(base, error)
  }
}

export const runW8 = async (env: Env, name: GroupSystemName, store: "pg" | "sqlite", limit: GroupLimit, sizes: GroupSizes): Promise<GroupSample> => {
  const base = { workload: "W8" as const, system: name, store, procs: 1, limit, load: loadavg()[0] }
  const smallCount = sizes.small * sizes.smallEach
  try {
    return await withStore(env, store, `w8_${name}`, async (target) => {
      const system = loadGroupSystem(name)
      const client = await system.open(target, limit)
      await client.enqueueBulk(Array.from({ length: sizes.big }, (_, i) => ({ i, g: 0, t: 0 })))
      let bigAtEnd = 0
      const { records, latencies } = await withWorkers(
        1,
        { system: name, target, concurrency: sizes.slots, limit, markFrom: sizes.big },
        async (workers) => {
          await new Promise((resolve) => setTimeout(resolve, 1000))
          const small: Array<GroupPayload> = []
          const t = now()
          for (let k = 0; k < sizes.smallEach; k++) {
            for (let g = 1; g <= sizes.small; g++) small.push({ i: sizes.big + small.length, g, t })
          }
          await client.enqueueBulk(small)
          // Not all started in time: the figures are of those that did (the table says how many).
          await workers.waitFor(() => workers.marked >= smallCount, W8_TIMEOUT_MS, "the small groups").catch(() => {})
          bigAtEnd = workers.done - workers.marked
        }
      ).finally(() => client.close())
      const c = check(records)
      return {
        ...base,
        expected: smallCount,
        check: c,
        latency: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: Math.max(...latencies), n: latencies.length },
        bigThrough: bigAtEnd / sizes.big
      }
    })
  } catch (error) {
    return failed(base, error)
  }
}

// ---------------------------------------------------------------- G6: a big grouped backlog (Docket only)

const PG_BACKLOG = `
INSERT INTO docket_items (kind, payload, group_key, run_at, created_at, updated_at)
SELECT 'seq', '{"i":' || g || ',"g":' || (g % $3::int) || ',"t":0}',
       CASE WHEN $4::boolean THEN 'g' || (g % $3::int) END, $1::bigint, $1::bigint, $1::bigint
FROM generate_series(0, $2::int - 1) g ORDER BY g`

const SQLITE_BACKLOG = `
WITH RECURSIVE s(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM s WHERE x + 1 < @count)
INSERT INTO docket_items (kind, payload, group_key, run_at, created_at, updated_at)
SELECT 'seq', '{"i":' || x || ',"g":' || (x % @groups) || ',"t":0}',
       CASE WHEN @grouped THEN 'g' || (x % @groups) END, @now, @now, @now FROM s`

/** `count` items due now, item i in group i % groups (so a group's items are `groups` ids apart), or in none. */
export const buildBacklog = async (target: Target, count: number, groups: number, grouped: boolean) => {
  const nowMs = Date.now()
  if (target.store === "pg") {
    const client = new pg.Client({ connectionString: target.url, application_name: "bench-groups-backlog" })
    await client.connect()
    try {
      await client.query(PG_BACKLOG, [nowMs, count, groups, grouped])
      await client.query("VACUUM ANALYZE docket_items")
      // The build's writes flushed now, so that no checkpoint of them falls
      // inside the drain of one run and not of another.
      await client.query("CHECKPOINT")
    } finally {
      await client.end()
    }
  } else if (target.store === "sqlite") {
    const db = new Database(target.file)
    try {
      db.prepare(SQLITE_BACKLOG).run({ count, groups, grouped: grouped ? 1 : 0, now: nowMs })
    } finally {
      db.close()
    }
  }
}

export const runBacklog = async (env: Env, store: "pg" | "sqlite", grouped: boolean, sizes: GroupSizes): Promise<GroupSample> => {
  const limit = grouped ? SEQUENCE : null
  const base = { workload: "G6" as const, system: grouped ? "docket" as const : "docket-ungrouped" as const, store, procs: 1, limit, load: loadavg()[0] }
  try {
    return await withStore(env, store, `g6_${grouped ? "grouped" : "plain"}`, async (target) => {
      const client = await loadGroupSystem("docket").open(target, limit)
      await client.close()
      await buildBacklog(target, sizes.backlog, sizes.backlogGroups, grouped)
      const { records } = await withWorkers(
        1,
        { system: "docket", target, concurrency: sizes.slots, limit, markFrom: Infinity },
        (workers) => workers.waitFor(() => workers.done >= sizes.drain, DRAIN_TIMEOUT_MS, `${sizes.drain} items`)
      )
      const c = check(records)
      return { ...base, check: c, rate: c.runs / (c.spanMs / 1000) }
    })
  } catch (error) {
    return failed(base, error)
  }
}
