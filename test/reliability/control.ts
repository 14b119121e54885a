/**
 * Kinds control across processes (issue 16), on PostgreSQL and on one SQLite
 * file the processes share. Per dialect, one queue and three real `docket
 * worker` processes (5 slots each) go through the phases below in turn, each
 * on a kind of its own (a worker start costs seconds on a busy machine); the
 * kind is limited or paused with the real `docket kind` command, or with
 * QueueRepo where the instant of a change must be known to the millisecond.
 * The task records each run's start and end itself
 * (fixtures/reliability/control/_record.mts), and every figure comes from
 * those records (controlRuns.ts):
 *
 * - concurrency: a kind limited to 2, 60 runs of 200 ms: never more than 2
 *   running at once, all finish.
 * - raise: the limit raised to 4 while they run: before, never above 2; after,
 *   above 2 and never above 4, without a restart.
 * - rate: 20 starts a second, declared by the task file, 100 items: no window
 *   of 1 s holds more than 20 claims (database clock).
 * - kill: a process SIGKILLed while it runs an item of a kind limited to 2:
 *   its runs end at the kill, and even counting them until their leases run
 *   out (the claim counts a dead worker's items until then) the limit holds;
 *   its items run again once their leases end.
 * - pause: a kind paused (`docket kind pause`) before the phases above, its
 *   items enqueued then: none starts while the workers run every other
 *   phase's items; on `docket kind resume` they start at once (PostgreSQL: by
 *   NOTIFY, well under the poll; SQLite: within a poll), in the 2 processes
 *   left after the kill.
 *
 * Then, on PostgreSQL, the kill scenario (kill.ts) with its kind limited to 5
 * across 3 × 10 slots: its rules, and never more than 5 running at once.
 */
import { SqlClient } from "@effect/sql"
import { Effect, ManagedRuntime } from "effect"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as QueueRepo from "../../src/QueueRepo.js"
import { docket } from "../support/cli.js"
import { freshDir, freshPgDatabase, pgAvailable, repoLayer } from "../support/db.js"
import { finishedItems, firstAbove, maxInWindow, maxRunning, profile, type Run, readRuns, type Span } from "./controlRuns.js"
import { killScenarioLimited } from "./controlKill.js"
import { fixture, killWorker, report, startWorker, waitFor, type WorkerProcess } from "./support.js"

type DialectName = "pg" | "sqlite"

const KINDS = {
  limited: "ctl.limited",
  raise: "ctl.raise",
  rate: "ctl.rate",
  killed: "ctl.killed",
  paused: "ctl.paused",
  other: "ctl.other"
} as const

/**
 * The workers. On PostgreSQL the poll is long (10 s): every pickup the phases
 * measure must come from a wake-up (NOTIFY, an outcome written here, a lease
 * or a rate slot ending), and a start soon after the resume can only be the
 * resume's NOTIFY. On SQLite, with no wake-up across processes, they poll
 * every 200 ms.
 */
const FLEET = { processes: 3, perProcess: 5, leaseMs: 1500, pollMs: { pg: 10_000, sqlite: 200 } }

/** A queue, the folder of its runs' records, this process's repository on it, and its live workers. */
interface Queue {
  readonly dialect: DialectName
  readonly url: string
  readonly repo: <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) => Promise<A>
  /** A statement with $1, $2 ... parameters (each once, in order), on either dialect. */
  readonly query: <A extends object>(text: string, params?: ReadonlyArray<unknown>) => Promise<ReadonlyArray<A>>
  /** The workers not killed. */
  readonly live: Array<WorkerProcess>
  /** The runs of a kind recorded so far. */
  readonly runs: (kind: string) => Array<Run>
  readonly close: () => Promise<void>
}

/** A fresh queue of the dialect, migrated here before any worker starts on it. */
const openQueue = async (dialect: DialectName): Promise<Queue> => {
  const logs = freshDir()
  const sqliteDir = dialect === "sqlite" ? freshDir() : undefined
  const pg = dialect === "pg" ? await freshPgDatabase() : undefined
  const url = pg?.url ?? join(sqliteDir!.dir, "queue.db")
  const runtime = ManagedRuntime.make(repoLayer(url))
  const live: Array<WorkerProcess> = []
  const everyWorker: Array<WorkerProcess> = []
  const repo: Queue["repo"] = (f) => runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, f))
  await repo((r) => r.stats)
  const q: Queue = {
    dialect,
    url,
    repo,
    query: (text, params = []) =>
      runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.unsafe(dialect === "pg" ? text : text.replace(/\$\d+/g, "?"), [...params]))) as never,
    live,
    runs: (kind) => readRuns(logs.dir).filter((r) => r.kind === kind),
    close: async () => {
      await Promise.all(everyWorker.map((w) => killWorker(w)))
      await runtime.dispose()
      await pg?.drop()
      sqliteDir?.remove()
      logs.remove()
    }
  }
  for (let i = 0; i < FLEET.processes; i++) {
    const worker = startWorker({
      database: url,
      tasks: fixture("control"),
      args: [
        "--concurrency", String(FLEET.perProcess),
        "--lease", `${FLEET.leaseMs}ms`,
        "--poll", `${FLEET.pollMs[dialect]}ms`
      ],
      env: { CONTROL_LOG_DIR: logs.dir }
    })
    live.push(worker)
    everyWorker.push(worker)
  }
  return q
}

const enqueue = (q: Queue, kind: string, count: number, ms: number, from = 1) =>
  q.repo((r) => r.enqueueMany(Array.from({ length: count }, (_, i) => ({ kind, payload: { n: from + i, ms } }))))

/** Waits until `count` items of `kind` have a run that returned. */
const waitFinished = (q: Queue, kind: string, count: number, timeoutMs = 60_000) =>
  waitFor(`${count} items of ${kind} finished`, () => finishedItems(q.runs(kind)).size >= count, timeoutMs, 50)

/** Nothing of the kind left waiting, running or dead, once its last outcomes are written (batched after the runs). */
const expectKindDone = async (q: Queue, kind: string) => {
  const counts = async () => {
    const c = (await q.repo((r) => r.stats)).byKind[kind]
    return { due: c?.due ?? 0, scheduled: c?.scheduled ?? 0, running: c?.running ?? 0, dead: c?.dead ?? 0 }
  }
  const none = { due: 0, scheduled: 0, running: 0, dead: 0 }
  await waitFor(`the outcomes of ${kind} written`, async () => JSON.stringify(await counts()) === JSON.stringify(none), 10_000)
    .catch(() => undefined)
  expect(await counts()).toEqual(none)
}

/** A run's span; one that never returned ends at `endOf` (its process's kill, its lease's end), else never. */
const spanOf = (endOf: (r: Run) => number | undefined = () => undefined) => (r: Run): Span => ({
  start: r.start,
  end: r.end ?? endOf(r) ?? Infinity
})

const seconds = (ms: number) => Math.round(ms / 100) / 10
const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]
}

const setLimit = (q: Queue, kind: string, concurrency: number) => q.repo((r) => r.setKindLimits(kind, { concurrency }))

// --- the phases ---

const CONC = { limit: 2, items: 60, ms: 200 }

const concurrency = async (q: Queue) => {
  const kind = KINDS.limited
  const started = Date.now()
  await enqueue(q, kind, CONC.items, CONC.ms)
  await waitFinished(q, kind, CONC.items)
  const drainedMs = Date.now() - started
  await expectKindDone(q, kind)
  const runs = q.runs(kind)
  const most = maxRunning(profile(runs.map(spanOf())))
  report(`control concurrency (${q.dialect})`, {
    processes: FLEET.processes,
    perProcess: FLEET.perProcess,
    limit: CONC.limit,
    items: CONC.items,
    runs: runs.length,
    maxConcurrent: most,
    overshoot: Math.max(0, most - CONC.limit),
    processesThatRan: new Set(runs.map((r) => r.pid)).size,
    drainS: seconds(drainedMs),
    idealS: seconds((CONC.items * CONC.ms) / CONC.limit)
  })
  expect(runs.length).toBe(CONC.items)
  expect(most).toBeLessThanOrEqual(CONC.limit)
  // Obeyed, and used: the kind's places are filled.
  expect(most).toBe(CONC.limit)
}

const raise = async (q: Queue) => {
  const kind = KINDS.raise
  const raised = 4
  await setLimit(q, kind, CONC.limit)
  const started = Date.now()
  await enqueue(q, kind, CONC.items, CONC.ms)
  await waitFinished(q, kind, CONC.items / 3)
  const before = Date.now()
  await setLimit(q, kind, raised)
  const after = Date.now()
  await waitFinished(q, kind, CONC.items)
  const drainedMs = Date.now() - started
  await expectKindDone(q, kind)
  const runs = q.runs(kind)
  const steps = profile(runs.map(spanOf()))
  const mostBefore = maxRunning(steps, -Infinity, before)
  const mostAfter = maxRunning(steps, after)
  const most = maxRunning(steps)
  const above = firstAbove(steps, CONC.limit, before)
  report(`control concurrency raise (${q.dialect})`, {
    limitBefore: CONC.limit,
    limitAfter: raised,
    items: CONC.items,
    maxConcurrentBefore: mostBefore,
    overshootBefore: Math.max(0, mostBefore - CONC.limit),
    maxConcurrentAfter: mostAfter,
    maxConcurrent: most,
    overshoot: Math.max(0, most - raised),
    raiseCallMs: after - before,
    raiseToAboveOldLimitMs: above === undefined ? "never" : above - after,
    drainS: seconds(drainedMs)
  })
  expect(runs.length).toBe(CONC.items)
  expect(mostBefore).toBeLessThanOrEqual(CONC.limit)
  expect(most).toBeLessThanOrEqual(raised)
  expect(mostAfter).toBeGreaterThan(CONC.limit)
}

const RATE = { limit: 20, periodMs: 1000, items: 100, ms: 20 }

const rate = async (q: Queue) => {
  const kind = KINDS.rate
  // The task file declares 20/1s: written by the pools when they started.
  const declared = (await q.repo((r) => r.listKinds)).find((k) => k.kind === kind)
  expect({ rate: declared?.rate, by: declared?.limitsSetBy }).toEqual({
    rate: { limit: RATE.limit, periodMs: RATE.periodMs },
    by: "code"
  })
  const started = Date.now()
  await enqueue(q, kind, RATE.items, RATE.ms)
  await waitFinished(q, kind, RATE.items, 40_000)
  const drainedMs = Date.now() - started
  await expectKindDone(q, kind)
  const runs = q.runs(kind)
  const claims = runs.map((r) => r.claimedAt)
  const byDb = maxInWindow(claims, RATE.periodMs)
  const byHandler = maxInWindow(runs.map((r) => r.start), RATE.periodMs)
  const spanMs = Math.max(...claims) - Math.min(...claims)
  const idealSpanMs = ((RATE.items - RATE.limit) / RATE.limit) * RATE.periodMs
  const lags = runs.map((r) => r.start - r.claimedAt)
  report(`control rate (${q.dialect})`, {
    processes: q.live.length,
    limit: `${RATE.limit}/${RATE.periodMs}ms`,
    items: RATE.items,
    runs: runs.length,
    maxStartsPerWindowDbClock: byDb,
    overshoot: Math.max(0, byDb - RATE.limit),
    maxStartsPerWindowHandlerClock: byHandler,
    claimToStartP50Ms: percentile(lags, 0.5),
    claimToStartMaxMs: Math.max(...lags),
    firstToLastClaimS: seconds(spanMs),
    idealFirstToLastS: seconds(idealSpanMs),
    drainS: seconds(drainedMs),
    achievedPerS: Math.round((RATE.items / (drainedMs / 1000)) * 10) / 10
  })
  expect(runs.length).toBe(RATE.items)
  expect(claims.every(Number.isFinite)).toBe(true)
  expect(byDb).toBeLessThanOrEqual(RATE.limit)
  // Obeyed, and used: the first window is full.
  expect(byDb).toBe(RATE.limit)
  // Not starved: a freed slot is taken soon (the pools sleep until it frees, not for a poll).
  expect(spanMs).toBeLessThan(2.5 * idealSpanMs)
}

const kill = async (q: Queue) => {
  const kind = KINDS.killed
  await setLimit(q, kind, CONC.limit)
  const started = Date.now()
  await enqueue(q, kind, CONC.items, CONC.ms)
  // In the middle: a third done, and the victim running an item of the kind.
  let victim: WorkerProcess | undefined
  await waitFor("a third done and a worker running an item", () => {
    const runs = q.runs(kind)
    if (finishedItems(runs).size < CONC.items / 3) return false
    victim = q.live.find((w) => runs.some((r) => r.pid === w.pid && r.end === null))
    return victim !== undefined
  }, 60_000, 20)
  await killWorker(victim!)
  const killedAt = Date.now()
  q.live.splice(q.live.indexOf(victim!), 1)
  const leases = await q.query<{ id: number | string; lease_until: number | string }>(
    "SELECT id, lease_until FROM docket_items WHERE state = 'running' AND claimed_by = $1",
    [victim!.name]
  )
  const leaseEnd = new Map(leases.map((l) => [Number(l.id), Number(l.lease_until)]))
  await waitFinished(q, kind, CONC.items)
  const drainedMs = Date.now() - started
  await expectKindDone(q, kind)

  const runs = q.runs(kind)
  const isVictim = (r: Run) => r.pid === victim!.pid
  const killed = runs.filter((r) => isVictim(r) && r.end === null)
  const most = maxRunning(profile(runs.map(spanOf((r) => (isVictim(r) ? killedAt : undefined)))))
  // The claim counts the dead worker's items until their leases run out: so does this.
  const mostLeased = maxRunning(profile(runs.map(spanOf((r) => (isVictim(r) ? leaseEnd.get(r.item) ?? killedAt : undefined)))))
  const recoveries = killed.map((k) => {
    const next = runs.find((r) => r.item === k.item && r.attempt > k.attempt)
    return next === undefined ? Infinity : next.start - killedAt
  })
  const recoveryBoundMs = FLEET.leaseMs + 1000
  report(`control concurrency kill (${q.dialect})`, {
    limit: CONC.limit,
    items: CONC.items,
    killedRuns: killed.length,
    killedLeases: leaseEnd.size,
    maxConcurrent: most,
    overshoot: Math.max(0, most - CONC.limit),
    maxConcurrentCountingDeadLeases: mostLeased,
    overshootCountingDeadLeases: Math.max(0, mostLeased - CONC.limit),
    maxLeaseLeftAtKillMs: Math.max(0, ...[...leaseEnd.values()].map((t) => t - killedAt)),
    maxRecoveryMs: Math.max(0, ...recoveries),
    recoveryBoundMs,
    drainS: seconds(drainedMs)
  })
  expect(killed.length).toBeGreaterThan(0)
  expect(runs.filter((r) => r.end === null && !isVictim(r))).toEqual([])
  expect(most).toBeLessThanOrEqual(CONC.limit)
  expect(mostLeased).toBeLessThanOrEqual(CONC.limit)
  // Taken again once its lease ran out (renewed at most a third of a lease before the kill):
  // the survivors sleep until a lease ends, not for a poll.
  expect(Math.max(...recoveries)).toBeLessThanOrEqual(recoveryBoundMs)
}

const PAUSED_ITEMS = 10
const RESUME_BOUND_MS = { pg: 1000, sqlite: FLEET.pollMs.sqlite + 800 }

const resume = async (q: Queue, pausedSince: number) => {
  const kind = KINDS.paused
  // The other phases ran while it was paused; a last round of another kind's items now
  // (on PostgreSQL its NOTIFY wakes every pool). A pool that claimed nothing sleeps until
  // the poll or the end of a running item's lease, whichever is first: once those leases
  // are past, every pool's next look on PostgreSQL is its poll, 10 s away, and a start
  // soon after the resume can only come from the resume's NOTIFY.
  await enqueue(q, KINDS.other, 4, 1)
  await waitFinished(q, KINDS.other, 4, 20_000)
  const leasesEnd = Math.max(...q.runs(KINDS.other).map((r) => r.claimedAt)) + FLEET.leaseMs
  await waitFor("the last leases of the other kind past", () => Date.now() > leasesEnd + 200, 10_000, 50)
  const pausedMs = Date.now() - pausedSince
  const startsWhilePaused = q.runs(kind).length
  const waiting = (await q.repo((r) => r.stats)).byKind[kind]?.due
  const othersRunMeanwhile = Object.values(KINDS).filter((k) => k !== kind)
    .reduce((n, k) => n + q.runs(k).filter((r) => r.start > pausedSince).length, 0)

  const resumed = await docket(["kind", "resume", kind, "--database", q.url])
  expect(resumed.code, resumed.stderr).toBe(0)
  // When the resume was written, on the database's clock (as the claims' times).
  const [{ updated_at }] = await q.query<{ updated_at: number | string }>(
    "SELECT updated_at FROM docket_kinds WHERE kind = $1",
    [kind]
  )
  const resumedAt = Number(updated_at)
  await waitFor(`every ${kind} item started`, () => q.runs(kind).length >= PAUSED_ITEMS, 30_000, 20)
  await waitFinished(q, kind, PAUSED_ITEMS, 30_000)
  await expectKindDone(q, kind)
  const runs = q.runs(kind)
  const claimLatency = Math.min(...runs.map((r) => r.claimedAt)) - resumedAt
  const startLatency = Math.min(...runs.map((r) => r.start)) - resumedAt
  const boundMs = RESUME_BOUND_MS[q.dialect]
  report(`control pause (${q.dialect})`, {
    workers: q.live.length,
    pollMs: FLEET.pollMs[q.dialect],
    pausedItems: PAUSED_ITEMS,
    pausedS: seconds(pausedMs),
    pollsWhilePaused: Math.floor(pausedMs / FLEET.pollMs[q.dialect]),
    otherRunsWhilePaused: othersRunMeanwhile,
    startsWhilePaused,
    resumeToFirstClaimMs: claimLatency,
    resumeToFirstStartMs: startLatency,
    resumeToAllStartedMs: Math.max(...runs.map((r) => r.start)) - resumedAt,
    boundMs
  })
  expect(startsWhilePaused).toBe(0)
  expect(waiting).toBe(PAUSED_ITEMS)
  expect(othersRunMeanwhile).toBeGreaterThan(0)
  expect(claimLatency).toBeGreaterThanOrEqual(0)
  expect(startLatency).toBeLessThan(boundMs)
}

const DIALECTS: ReadonlyArray<{ readonly name: DialectName; readonly skip: boolean }> = [
  { name: "pg", skip: !pgAvailable },
  { name: "sqlite", skip: false }
]

export const controlScenario = () => {
  for (const { name, skip } of DIALECTS) {
    describe.skipIf(skip)(`control (${name}): paused and limited kinds across 3 worker processes`, () => {
      let q: Queue
      let pausedSince = 0
      beforeAll(async () => {
        q = await openQueue(name)
        // The kind of the first phase limited, and the paused kind paused, by a person (at once: each takes seconds).
        const [set, paused] = await Promise.all([
          docket(["kind", "set", KINDS.limited, "--concurrency", String(CONC.limit), "--database", q.url]),
          docket(["kind", "pause", KINDS.paused, "--database", q.url]),
          ...q.live.map((w) => w.ready(60_000))
        ])
        expect(set.code, set.stderr).toBe(0)
        expect(paused.code, paused.stderr).toBe(0)
        await enqueue(q, KINDS.paused, PAUSED_ITEMS, 50)
        pausedSince = Date.now()
      }, 120_000)
      afterAll(() => q?.close())

      it("a global concurrency limit set by `docket kind set` holds across processes", () => concurrency(q), 60_000)
      it("a limit raised while the workers run applies at once, without a restart", () => raise(q), 60_000)
      it("no window of a period holds more starts than the rate (database clock)", () => rate(q), 60_000)
      it("the limit holds while a process is SIGKILLed; its items run again once their leases end", () => kill(q), 60_000)
      it("a paused kind's items never start while others run; on resume they start at once", () =>
        resume(q, pausedSince), 60_000)
    })
  }
  describe.skipIf(!pgAvailable)("control: the kill scenario with a global limit (PostgreSQL)", () => {
    it("every job runs; duplicates only after kills; never more running than the limit", killScenarioLimited, 360_000)
  })
}
