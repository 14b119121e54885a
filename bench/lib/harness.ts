/**
 * The benchmark's runs. Every run gets a fresh store; contenders take turns
 * (for each repetition, each workload, each contender in a rotating order),
 * so slow drift of a noisy machine spreads over all of them.
 *
 * W1 enqueue: bulk, then one by one, from this (the parent) process; the
 *    one-by-one rate is timed after `oneWarmup` untimed single enqueues.
 * W2 drain: jobs queued first, then `procs` worker processes start at once;
 *    the rate is jobs / (first handler start .. the store seen empty).
 * W3 latency: an idle running worker; single jobs `interval` ms apart;
 *    enqueue-to-start of each (timestamp in the payload), after
 *    `latencyWarmup` jobs sent the same way and not counted.
 *
 * Why the warm-ups (the same count for every contender): W1 and W3 run their
 * enqueues in this one process, where the contenders' Effect code is shared
 * and V8 optimises a function only after many calls. Timed from cold, a
 * contender's figure depended on how much of its code the ones before it had
 * warmed, and on V8's tier-up rather than on the queue: measured on
 * 2026-12-06, Docket's first 2,000 single enqueues cost 488-775 us of client
 * CPU each, the next 2,000 153-217 us (W1 one by one 1,016-1,333/s cold,
 * 1,941-2,064/s after 2,000 untimed; PersistedQueue 1,697-2,868 / 2,229-2,247).
 * A queue in production enqueues from a process that has been running;
 * these figures are that steady state.
 * W4 retries: jobs that fail once, then succeed; first start .. store empty.
 * W5 scale-out: W2 with 1, 2 and 4 worker processes.
 * W6 big backlog: W2's drain (`drain` jobs due now, 1 process) in a store that
 *    also holds `backlogWaiting` items due later and `backlogDone` finished
 *    items kept for their history, built with SQL (contenders with `backlog`).
 */
import { createConnection } from "node:net"
import { KNOWN, load, type Name, W5_CONTENDERS } from "../adapters/registry.js"
import type { Contender, Mode, Payload, Probe, Target } from "../adapters/types.js"
import type { ChildResult } from "./protocol.js"
import { now } from "./protocol.js"
import { statementKey } from "./instrument.js"
import { percentile } from "./stats.js"
import {
  cpuDelta,
  type DbCounters,
  serverCpuMs,
  dropTarget,
  type Env,
  freshTarget,
  pgConnections,
  pgCounters,
  pgReachable,
  waitNoConnections
} from "./stores.js"
import { PROJECT_DIR, WorkerGroup } from "./workers.js"

export const WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6"] as const
export type Workload = (typeof WORKLOADS)[number]

export interface Sizes {
  readonly bulk: number
  readonly one: number
  readonly drain: number
  readonly latency: number
  readonly latencyIntervalMs: number
  /** W1: untimed single enqueues before the timed ones (see the module's comment). */
  readonly oneWarmup: number
  /** W3: untimed jobs before the timed ones, sent the same way. */
  readonly latencyWarmup: number
  readonly retry: number
  readonly concurrency: number
  /** W6: items waiting behind the drain (due in a day), and finished items kept (default 1,000,000 each). */
  readonly backlogWaiting?: number
  readonly backlogDone?: number
}

/** W6's backlog sizes of `sizes` (the defaults where it names none). */
export const backlogOf = (sizes: Sizes) => ({
  waiting: sizes.backlogWaiting ?? 1_000_000,
  done: sizes.backlogDone ?? 1_000_000
})

export const DEFAULT_SIZES: Sizes = {
  bulk: 20_000,
  one: 2_000,
  drain: 20_000,
  latency: 200,
  latencyIntervalMs: 20,
  oneWarmup: 2_000,
  latencyWarmup: 200,
  retry: 2_000,
  concurrency: 10,
  backlogWaiting: 1_000_000,
  backlogDone: 1_000_000
}

export const QUICK_SIZES: Sizes = {
  bulk: 2_000,
  one: 200,
  drain: 2_000,
  latency: 40,
  latencyIntervalMs: 20,
  oneWarmup: 100,
  latencyWarmup: 10,
  retry: 200,
  concurrency: 10,
  backlogWaiting: 20_000,
  backlogDone: 20_000
}

export interface Options {
  readonly contenders: ReadonlyArray<Name>
  readonly workloads: ReadonlyArray<Workload>
  readonly repeat: number
  readonly sizes: Sizes
  readonly env: Env
  /** Worker-process counts of W2 (default [1, 2]) and of W5 (default [1, 2, 4]). */
  readonly w2Procs?: ReadonlyArray<number>
  readonly w5Procs?: ReadonlyArray<number>
  readonly log?: (line: string) => void
  /**
   * A run that took longer than this (seconds, setup included) is not
   * repeated, to keep the full benchmark's time bounded (0: always repeat).
   */
  readonly maxRunSeconds?: number
}

export type RunKind = "W1" | "W2" | "W3" | "W4" | "W6"

export interface OnceCheck {
  readonly ok: boolean
  readonly missing: number
  readonly duplicates: number
  readonly detail: string
}

export interface Sample {
  readonly contender: Name
  readonly kind: RunKind
  readonly procs: number
  readonly rep: number
  readonly error?: string | undefined
  readonly values: Record<string, number>
  readonly once?: OnceCheck | undefined
  readonly topStatements?: ReadonlyArray<readonly [string, number, number]> | undefined
  readonly libStats?: ReadonlyArray<Record<string, number> | null> | undefined
}

export interface Result {
  readonly options: Options
  readonly contenders: ReadonlyArray<Contender>
  readonly skipped: ReadonlyArray<{ readonly name: string; readonly reason: string }>
  readonly samples: ReadonlyArray<Sample>
  readonly startedAt: Date
  readonly durationMs: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const payloads = (n: number): Array<Payload> => {
  const t = now()
  return Array.from({ length: n }, (_, i) => ({ i, t }))
}

const redisReachable = (url: string): Promise<string | undefined> =>
  new Promise((resolve) => {
    const u = new URL(url)
    const socket = createConnection({ host: u.hostname, port: Number(u.port || 6379) })
    const timer = setTimeout(() => {
      socket.destroy()
      resolve(`no answer from ${url}`)
    }, 2000)
    socket.once("connect", () => {
      clearTimeout(timer)
      socket.end()
      resolve(undefined)
    })
    socket.once("error", (error) => {
      clearTimeout(timer)
      resolve(String(error))
    })
  })

/** Each payload index must appear exactly once among the successful runs. */
export const checkOnce = (n: number, results: ReadonlyArray<ChildResult>): OnceCheck => {
  const seen = new Uint32Array(n)
  let outOfRange = 0
  for (const r of results) {
    for (const i of r.seen) {
      if (i >= 0 && i < n) seen[i]++
      else outOfRange++
    }
  }
  let missing = 0
  let duplicates = 0
  for (const c of seen) {
    if (c === 0) missing++
    else if (c > 1) duplicates += c - 1
  }
  const ok = missing === 0 && duplicates === 0 && outOfRange === 0
  return {
    ok,
    missing,
    duplicates,
    detail: ok ? `${n} jobs, each run once` : `${missing} missing, ${duplicates} duplicate runs, ${outOfRange} unknown`
  }
}

interface StoreCost {
  readonly before: () => Promise<void>
  /** Per-job cost after the workers are gone; `ownQueries` = statements this process sent to the store meanwhile. */
  readonly after: (jobs: number, ownQueries: number) => Promise<Record<string, number>>
}

const storeCost = (env: Env, target: Target): StoreCost => {
  if (target.store === "pg") {
    let c0: DbCounters | undefined
    return {
      before: async () => {
        await waitNoConnections(env, target.database)
        c0 = await pgCounters(env, target.database)
      },
      after: async (jobs, ownQueries) => {
        await waitNoConnections(env, target.database)
        const c1 = await pgCounters(env, target.database)
        const b = c0!
        return {
          xactsPerJob: (c1.xacts - b.xacts - ownQueries) / jobs,
          rowsWrittenPerJob: (c1.inserted - b.inserted + c1.updated - b.updated + c1.deleted - b.deleted) / jobs,
          insertsPerJob: (c1.inserted - b.inserted) / jobs,
          updatesPerJob: (c1.updated - b.updated) / jobs,
          deletesPerJob: (c1.deleted - b.deleted) / jobs
        }
      }
    }
  }
  if (target.store === "redis") {
    let c0 = 0
    return {
      before: async () => {
        const { commandsProcessed } = await import("../adapters/bullmq.js")
        c0 = await commandsProcessed(target)
      },
      after: async (jobs) => {
        const { commandsProcessed } = await import("../adapters/bullmq.js")
        return { redisCommandsPerJob: ((await commandsProcessed(target)) - c0) / jobs }
      }
    }
  }
  return { before: async () => {}, after: async () => ({}) }
}

/** Polls the store every 5 ms until nothing is pending; returns when it saw that, and how many queries it sent. */
const waitEmpty = async (open: () => Promise<Probe>, timeoutMs: number) => {
  const probe = await open()
  let queries = 1 // its connection's own start-up
  try {
    const until = Date.now() + timeoutMs
    for (;;) {
      queries++
      const pending = await probe.pending()
      const at = now()
      if (pending === 0) return { at, queries }
      if (Date.now() > until) throw new Error(`the store still has ${pending} pending jobs after ${timeoutMs / 1000} s`)
      await sleep(5)
    }
  } finally {
    await probe.close()
  }
}

const childConfig = (contender: Contender, target: Target, mode: Mode, expect: number, sizes: Sizes, recordStarts = false) => ({
  contender: contender.name,
  target,
  concurrency: sizes.concurrency,
  mode,
  expect,
  recordStarts,
  projectDir: PROJECT_DIR
})

const rssOf = (results: ReadonlyArray<ChildResult>) => ({
  peakRssMb: Math.max(...results.map((r) => r.peakRssKb)) / 1024,
  loadedRssMb: Math.max(...results.map((r) => r.loadedRssKb)) / 1024,
  heapUsedAtPeakMb: Math.max(...results.map((r) => r.heapAtPeak.heapUsed)),
  heapTotalAtPeakMb: Math.max(...results.map((r) => r.heapAtPeak.heapTotal)),
  loopDelayMaxMs: Math.max(...results.map((r) => r.loopDelayMaxMs)),
  workerStartMs: Math.max(...results.map((r) => r.startMs)),
  workerStartCpuMs: Math.max(...results.map((r) => r.startCpuMs)),
  workerStopMs: Math.max(...results.map((r) => r.stopMs))
})

const statementsOf = (results: ReadonlyArray<ChildResult>, jobs: number) => {
  const total = results.reduce((n, r) => n + r.statements, 0)
  const merged = new Map<string, [number, number]>()
  for (const r of results) {
    for (const [text, n, ms] of r.topStatements) {
      const m = merged.get(text) ?? [0, 0]
      merged.set(text, [m[0] + n, m[1] + ms])
    }
  }
  return {
    statementsPerJob: total / jobs,
    top: [...merged].sort((a, b) => b[1][0] - a[1][0]).slice(0, 8).map(([text, [n, ms]]) => [text, n, ms] as const)
  }
}

// --- the runs -------------------------------------------------------------

const runW1 = async (env: Env, contender: Contender, sizes: Sizes): Promise<Omit<Sample, "contender" | "rep">> => {
  const target = await freshTarget(env, contender.store, contender.name)
  try {
    const client = await contender.open(target, "plain")
    let bulkMs: number
    let oneMs: number
    try {
      const bulk = payloads(sizes.bulk)
      const t0 = now()
      await client.enqueueBulk(bulk)
      bulkMs = now() - t0
      for (let k = 0; k < sizes.oneWarmup; k++) await client.enqueueOne({ i: sizes.bulk + sizes.one + k, t: now() })
      const t1 = now()
      for (let k = 0; k < sizes.one; k++) await client.enqueueOne({ i: sizes.bulk + k, t: now() })
      oneMs = now() - t1
    } finally {
      await client.close()
    }
    const probe = await contender.probe(target)
    const pending = await probe.pending().finally(() => probe.close())
    const expected = sizes.bulk + sizes.one + sizes.oneWarmup
    return {
      kind: "W1",
      procs: 0,
      values: { bulkRate: sizes.bulk / (bulkMs / 1000), oneRate: sizes.one / (oneMs / 1000) },
      once: {
        ok: pending === expected,
        missing: Math.max(0, expected - pending),
        duplicates: Math.max(0, pending - expected),
        detail: pending === expected ? `${expected} jobs stored` : `${pending} stored, expected ${expected}`
      }
    }
  } finally {
    await dropTarget(env, target)
  }
}

/**
 * The claim statement's time in the workers (from send to result), if the
 * contender names it: the mean per statement, and the sum per 1,000 jobs (a
 * claim takes a batch, whose size varies with the timing).
 */
const claimMsOf = (contender: Contender, target: Target, results: ReadonlyArray<ChildResult>, jobs: number): Record<string, number> => {
  if (contender.backlog === undefined) return {}
  const key = statementKey(contender.backlog.claimStatement(target.store))
  let count = 0
  let ms = 0
  for (const r of results) {
    for (const [text, n, total] of r.topStatements) {
      if (text === key) {
        count += n
        ms += total
      }
    }
  }
  return count === 0 ? {} : { claimMs: ms / count, claims: count, claimMsPer1000: (ms / jobs) * 1000 }
}

/** W6's store: the schema by `open`, then the backlog and the due items by SQL. */
const buildBacklog = async (contender: Contender, target: Target, sizes: Sizes) => {
  const t0 = now()
  await (await contender.open(target, "plain")).close()
  await contender.backlog!.build(target, { ...backlogOf(sizes), due: sizes.drain })
  return (now() - t0) / 1000
}

const runDrain = async (
  env: Env,
  contender: Contender,
  sizes: Sizes,
  procs: number,
  mode: Mode,
  backlog = false
): Promise<Omit<Sample, "contender" | "rep">> => {
  const n = mode === "plain" ? sizes.drain : sizes.retry
  const target = await freshTarget(env, contender.store, contender.name)
  let group: WorkerGroup | undefined
  let sampler: NodeJS.Timeout | undefined
  try {
    let buildSeconds: number | undefined
    if (backlog) {
      buildSeconds = await buildBacklog(contender, target, sizes)
    } else {
      const client = await contender.open(target, mode)
      try {
        await client.enqueueBulk(payloads(n))
      } finally {
        await client.close()
      }
    }
    const claimAlone = mode === "plain" ? await contender.backlog?.claimAlone?.(target) : undefined
    const cost = storeCost(env, target)
    await cost.before()
    group = await WorkerGroup.start(procs, childConfig(contender, target, mode, n, sizes))
    let maxConnections = 0
    if (target.store === "pg") {
      const sample = () =>
        void pgConnections(env, target.database).then((c) => {
          maxConnections = Math.max(maxConnections, c)
        }, () => {})
      sampler = setInterval(sample, 200)
    }
    const timeoutMs = 60_000 + n * (mode === "plain" ? 12 : 40)
    const serverCpu0 = await serverCpuMs(target)
    await group.go()
    await group.waitDone(n, timeoutMs)
    const empty = await waitEmpty(() => (backlog ? contender.backlog!.probe(target) : contender.probe(target)), 60_000)
    const serverCpu = cpuDelta(serverCpu0, await serverCpuMs(target))
    if (sampler !== undefined) clearInterval(sampler)
    const results = await group.stop()
    group = undefined
    const firstStart = Math.min(...results.map((r) => r.firstStart).filter((t) => t > 0))
    const lastEnd = Math.max(...results.map((r) => r.lastEnd))
    const seconds = (empty.at - firstStart) / 1000
    const once = checkOnce(n, results)
    const failures = results.reduce((s, r) => s + r.failures, 0)
    const retryOk = mode === "plain" || failures === n
    const dbCost = await cost.after(n, empty.queries)
    const statements = statementsOf(results, n)
    return {
      kind: backlog ? "W6" : mode === "plain" ? "W2" : "W4",
      procs,
      values: {
        ...(mode === "plain" ? { rate: n / seconds } : { seconds }),
        ...claimMsOf(contender, target, results, n),
        ...(buildSeconds === undefined ? {} : { buildSeconds }),
        ...(claimAlone === undefined ? {} : { claimAloneMs: claimAlone }),
        handlerWindowMs: lastEnd - firstStart,
        flushLagMs: empty.at - lastEnd,
        ...rssOf(results),
        ...dbCost,
        statementsPerJob: statements.statementsPerJob,
        ...(target.store === "pg" ? { connectionsPerProcess: maxConnections / procs } : {}),
        workerCpuMsPer1000: (results.reduce((sum, r) => sum + r.cpuMs, 0) / n) * 1000,
        serverCpuMsPer1000: (serverCpu / n) * 1000,
        failures
      },
      once: retryOk
        ? once
        : { ...once, ok: false, detail: `${once.detail}; ${failures} failed attempts, expected ${n}` },
      topStatements: statements.top,
      libStats: results.map((r) => r.libStats)
    }
  } finally {
    if (sampler !== undefined) clearInterval(sampler)
    group?.kill()
    await dropTarget(env, target)
  }
}

/**
 * What lies under W3's slowest starts (enqueue to start at or above `p95`):
 * the share whose wait overlaps a GC pause of the worker, the share that
 * overlaps only an event-loop stall (over 2 ms), and the GC pauses in all.
 */
const tailCauses = (results: ReadonlyArray<ChildResult>, p95: number) => {
  const overlaps = (spans: ReadonlyArray<readonly [number, number]>, from: number, to: number) =>
    spans.some(([start, ms]) => start < to && start + ms > from)
  let tail = 0
  let gc = 0
  let stall = 0
  for (const r of results) {
    r.starts.forEach(([, start], k) => {
      const latency = r.latencies[k]
      if (latency < p95) return
      tail++
      if (overlaps(r.gcPauses, start - latency, start)) gc++
      else if (overlaps(r.loopStalls, start - latency, start)) stall++
    })
  }
  const pauses = results.flatMap((r) => r.gcPauses.map(([, ms]) => ms))
  return {
    tailGcShare: tail === 0 ? 0 : gc / tail,
    tailStallShare: tail === 0 ? 0 : stall / tail,
    gcPauses: pauses.length,
    gcPauseMaxMs: pauses.length === 0 ? 0 : Math.max(...pauses)
  }
}

const runW3 = async (env: Env, contender: Contender, sizes: Sizes): Promise<Omit<Sample, "contender" | "rep">> => {
  const n = sizes.latency
  const warm = sizes.latencyWarmup
  const total = warm + n
  const target = await freshTarget(env, contender.store, contender.name)
  let group: WorkerGroup | undefined
  const inProcess = contender.latencyInProcess === true
  const returned = new Map<number, number>()
  try {
    const client = await contender.open(target, "plain")
    try {
      if (inProcess) await client.close()
      group = await WorkerGroup.start(1, childConfig(contender, target, "plain", total, sizes, true))
      await group.go()
      await sleep(500) // idle and running
      const timeoutMs = 30_000 + total * sizes.latencyIntervalMs
      if (inProcess) {
        await group.series(total, sizes.latencyIntervalMs, timeoutMs)
      } else {
        const t0 = now()
        for (let k = 0; k < total; k++) {
          const wait = t0 + k * sizes.latencyIntervalMs - now()
          if (wait > 0) await sleep(wait)
          await client.enqueueOne({ i: k, t: now() })
          returned.set(k, now())
        }
      }
      await group.waitDone(total, timeoutMs)
    } finally {
      if (!inProcess) await client.close()
    }
    const all = await group.stop()
    group = undefined
    // Only the timed jobs (payload index from `warm` on) make the figures.
    const results = all.map((r) => {
      const keep = r.starts.map(([i]) => i >= warm)
      return { ...r, starts: r.starts.filter((_, k) => keep[k]), latencies: r.latencies.filter((_, k) => keep[k]) }
    })
    const latencies = results.flatMap((r) => r.latencies)
    for (const r of results) for (const [i, at] of r.returned) returned.set(i, at)
    // Split each latency at the enqueue call's return (its commit): the call's
    // own time, and the pickup after it.
    const pickup: Array<number> = []
    const enqueueCall: Array<number> = []
    for (const r of results) {
      r.starts.forEach(([i, start], k) => {
        const back = returned.get(i)
        if (back === undefined) return
        pickup.push(start - back)
        enqueueCall.push(r.latencies[k] - (start - back))
      })
    }
    const tail = tailCauses(results, percentile(latencies, 95))
    return {
      kind: "W3",
      procs: 1,
      values: {
        ...tail,
        p50: percentile(latencies, 50),
        p95: percentile(latencies, 95),
        p99: percentile(latencies, 99),
        max: Math.max(...latencies),
        pickupP50: percentile(pickup, 50),
        pickupP99: percentile(pickup, 99),
        enqueueCallP50: percentile(enqueueCall, 50),
        ...rssOf(results)
      },
      once: checkOnce(total, all)
    }
  } finally {
    group?.kill()
    await dropTarget(env, target)
  }
}

// --- the plan -------------------------------------------------------------

interface Step {
  readonly kind: RunKind
  readonly procs: number
}

const plan = (asked: ReadonlyArray<Workload>, contender: Contender, options: Options): Array<Step> => {
  const steps: Array<Step> = []
  const drainProcs = new Set<number>()
  const workloads = asked.filter((w) => contender.workloads === undefined || contender.workloads.includes(w))
  if (workloads.includes("W2")) for (const p of options.w2Procs ?? [1, 2]) drainProcs.add(p)
  if (workloads.includes("W5") && W5_CONTENDERS.includes(contender.name as Name)) {
    for (const p of options.w5Procs ?? [1, 2, 4]) drainProcs.add(p)
  }
  if (workloads.includes("W1")) steps.push({ kind: "W1", procs: 0 })
  for (const p of [...drainProcs].sort((a, b) => a - b)) steps.push({ kind: "W2", procs: p })
  if (workloads.includes("W3")) steps.push({ kind: "W3", procs: 1 })
  if (workloads.includes("W4")) steps.push({ kind: "W4", procs: 1 })
  if (workloads.includes("W6") && contender.backlog !== undefined) steps.push({ kind: "W6", procs: 1 })
  return steps
}

const stepKey = (s: Step) => `${s.kind}:${s.procs}`

export const run = async (options: Options): Promise<Result> => {
  const log = options.log ?? (() => {})
  const startedAt = new Date()
  const t0 = Date.now()
  const skipped: Array<{ name: string; reason: string }> = []
  const loaded = await Promise.all(KNOWN.filter((n) => options.contenders.includes(n)).map(load))
  const pgProblem = loaded.some((c) => c.store === "pg") ? await pgReachable(options.env) : undefined
  const redisProblem = loaded.some((c) => c.store === "redis") ? await redisReachable(options.env.redisUrl) : undefined
  const contenders: Array<Contender> = []
  for (const contender of loaded) {
    const reason = contender.unavailable?.() ??
      (contender.store === "pg" && pgProblem !== undefined ? `PostgreSQL unreachable: ${pgProblem}` : undefined) ??
      (contender.store === "redis" && redisProblem !== undefined ? `Redis unreachable: ${redisProblem}` : undefined)
    if (reason !== undefined) {
      skipped.push({ name: contender.name, reason })
      log(`skipping ${contender.name}: ${reason}`)
    } else {
      contenders.push(contender)
    }
  }

  // Every step of every contender, in the order the workloads are listed.
  const allSteps = new Map<string, Step>()
  for (const c of contenders) for (const s of plan(options.workloads, c, options)) allSteps.set(stepKey(s), s)
  const order = (s: Step) => ["W1", "W2", "W3", "W4", "W6"].indexOf(s.kind) * 10 + s.procs
  const steps = [...allSteps.values()].sort((a, b) => order(a) - order(b))

  const samples: Array<Sample> = []
  const firstRunSeconds = new Map<string, number>()
  const maxRun = options.maxRunSeconds ?? 0
  for (let rep = 1; rep <= options.repeat; rep++) {
    for (const step of steps) {
      const takers = contenders.filter((c) => plan(options.workloads, c, options).some((s) => stepKey(s) === stepKey(step)))
      // Rotate who goes first each repetition.
      const shift = (rep - 1) % Math.max(1, takers.length)
      const turn = [...takers.slice(shift), ...takers.slice(0, shift)]
      for (const contender of turn) {
        const key = `${contender.name}/${stepKey(step)}`
        if (rep > 1 && maxRun > 0 && (firstRunSeconds.get(key) ?? 0) > maxRun) continue
        const label = `${step.kind}${step.kind === "W2" ? ` ${step.procs}p` : ""} ${contender.name} #${rep}`
        const started = Date.now()
        const once = () =>
          step.kind === "W1"
            ? runW1(options.env, contender, options.sizes)
            : step.kind === "W2"
            ? runDrain(options.env, contender, options.sizes, step.procs, "plain")
            : step.kind === "W3"
            ? runW3(options.env, contender, options.sizes)
            : step.kind === "W6"
            ? runDrain(options.env, contender, options.sizes, 1, "plain", true)
            : runDrain(options.env, contender, options.sizes, 1, "retry")
        try {
          // A server out of connections (other load on the machine) is not the
          // contender's fault: such a run is tried once more.
          const sample = await once().catch(async (error: unknown) => {
            const message = error instanceof Error ? error.message : String(error)
            if (!/too many clients|Failed to connect|ECONNREFUSED|remaining connection slots/i.test(message)) throw error
            log(`${label}: ${message.split("\n")[0]}; trying once more`)
            await sleep(3000)
            return once()
          })
          samples.push({ contender: contender.name as Name, rep, ...sample })
          log(`${label}: ${describe(sample)}${sample.once?.ok === false ? `  CHECK FAILED: ${sample.once.detail}` : ""} (${((Date.now() - started) / 1000).toFixed(1)} s)`)
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error)
          samples.push({ contender: contender.name as Name, rep, kind: step.kind, procs: step.procs, error: message, values: {} })
          log(`${label}: FAILED ${message.split("\n")[0]}`)
        }
        if (rep === 1) firstRunSeconds.set(key, (Date.now() - started) / 1000)
      }
    }
  }
  return { options, contenders, skipped, samples, startedAt, durationMs: Date.now() - t0 }
}

const describe = (sample: Omit<Sample, "contender" | "rep">): string => {
  const v = sample.values
  const r = (x: number) => Math.round(x).toLocaleString("en-US")
  switch (sample.kind) {
    case "W1":
      return `bulk ${r(v.bulkRate)}/s, one by one ${r(v.oneRate)}/s`
    case "W2":
      return `${r(v.rate)} jobs/s, RSS ${v.peakRssMb.toFixed(0)} MB, ${v.statementsPerJob.toFixed(2)} stmts/job${claimNote(v)}`
    case "W6":
      return `${r(v.rate)} jobs/s${claimNote(v)} (backlog built in ${v.buildSeconds.toFixed(1)} s)`
    case "W3":
      return `p50 ${v.p50.toFixed(1)} ms, p95 ${v.p95.toFixed(1)} ms, p99 ${v.p99.toFixed(1)} ms`
    case "W4":
      return `${v.seconds.toFixed(2)} s`
  }
}

const claimNote = (v: Record<string, number>) =>
  v.claimMs === undefined
    ? ""
    : `, claim ${v.claimMs.toFixed(2)} ms x ${Math.round(v.claims)} (${v.claimMsPer1000.toFixed(1)} ms per 1,000 jobs)` +
      (v.claimAloneMs === undefined ? "" : `, claim of 10 alone ${v.claimAloneMs.toFixed(2)} ms`)
