/**
 * Failover: a primary and a streaming standby (two clusters of the test's
 * own, test/support/cluster.ts), workers and an enqueuer reaching the primary
 * through a TCP proxy (proxy.ts) that stands for what an HA set-up moves at a
 * failover (a virtual IP, a DNS name, HAProxy behind Patroni).
 *
 * Synchronous replication, two failovers in a row, the same three `docket
 * worker` processes throughout, while an enqueuer keeps adding items. Each
 * comes in the middle of a backlog's drain, with runs in progress (one of
 * them longer than the lease), and is a crash: the primary is stopped at once
 * (`pg_ctl stop -m immediate`: its connections are closed, the workers hear
 * of it at once), then
 *
 * 1. the standby is promoted at once and the proxy switched to it;
 * 2. the standby made of the new primary is promoted two leases later (an HA
 *    tool's detection: every lease in flight runs out meanwhile).
 *
 * With RELIABILITY_FAILOVER_VANISH=1 the second failover is a host that
 * vanishes instead: every connection through the proxy goes silent (no RST,
 * no FIN) before the primary stops, and the workers find out through their
 * bounds (the lease renewal's, the client-side statement timeout of 30 s).
 * Not in CI: it takes 30-60 s more (docs/reliability.md has its figures).
 *
 * Checked: the same worker processes go on by themselves and each runs items
 * again after each switch; every item whose enqueue returned (acknowledged) is
 * done on the last primary, none lost, one item per enqueue; no two runs of an
 * item overlap (from the handlers' own records, in files: the database is
 * what fails over); the second outage stopped runs (their leases ran out) and
 * they ran again. Measured, for each: the time from the stop to the first
 * item completed on the new primary (time to resume), and its parts.
 *
 * Asynchronous replication: what a failover loses, shown on purpose
 * (failoverAsync.ts).
 */
import { Effect, Either, ManagedRuntime } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as Docket from "../../src/Docket.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Cluster, makeSynchronous, privateStandby } from "../support/cluster.js"
import { asyncLossCase } from "./failoverAsync.js"
import { echo, KIND, makePair, overlapping, phases, type Repo, readRuns, runsOpen, SLOT, withRepo } from "./failoverSupport.js"
import { startProxy } from "./proxy.js"
import { delay, fixture, pgCount, pgPool, report, startWorker, stopWorker, waitFor, withDatabase, type WorkerProcess } from "./support.js"

const LEASE_MS = 2000
const WORKERS = 3
const CONCURRENCY = 4
/** Jobs per backlog (one before each failover). */
const BACKLOG = 240
/** Every LONG_EVERY-th job of a backlog works LONG_MS, longer than the lease; the others 50-150 ms. */
const LONG_EVERY = 40
const LONG_MS = 5000

export const failoverScenario = () =>
  describe("failover: the primary crashes mid-drain, the standby is promoted (private clusters, TCP proxy)", () => {
    it("synchronous replication, two failovers: workers go on unrestarted, no acknowledged item lost, no runs overlap", async () => {
      const phase = phases()
      const made = await makePair()
      phase("clusters made")
      if (made === undefined) return
      const clusters = [made.primary, made.standby]
      const logs = mkdtempSync(join(tmpdir(), "docket-failover-"))
      const proxy = await startProxy({ host: "127.0.0.1", port: made.primary.port })
      const viaProxy = proxy.url(withDatabase(made.primary.adminUrl, "docket_rel"))
      const workers: Array<WorkerProcess> = []
      const pools: Array<ReturnType<typeof pgPool>> = []
      const runtime: Repo = ManagedRuntime.make(Docket.layerClient(viaProxy))
      let producing = true
      try {
        await makeSynchronous(made.primary, SLOT)
        const acknowledged: Array<number> = []
        // A backlog of `BACKLOG` jobs from `first`, acknowledged once enqueueMany returned.
        const backlog = async (first: number) => {
          const requests = Array.from({ length: BACKLOG }, (_, i) => ({
            kind: KIND,
            payload: { job: first + i, ms: (first + i) % LONG_EVERY === 0 ? LONG_MS : 50 + Math.floor(Math.random() * 100) }
          }))
          await withRepo(runtime, (repo) => repo.enqueueMany(requests))
          acknowledged.push(...requests.map((r) => r.payload.job))
        }
        await backlog(1)
        for (let i = 0; i < WORKERS; i++) {
          workers.push(startWorker({
            database: viaProxy,
            tasks: fixture("failover"),
            args: ["--lease", `${LEASE_MS}ms`, "--poll", "500ms", "--concurrency", String(CONCURRENCY)],
            env: { RELIABILITY_LOG_DIR: logs },
            count: /storage error in /,
            keep: /lease lost/
          }))
        }
        if (process.env.RELIABILITY_DEBUG) for (const w of workers) echo(w)
        await Promise.all(workers.map((w) => w.ready(60_000)))
        const pids = workers.map((w) => w.pid).sort()
        phase("workers started")

        // The enqueuer: one item every 25 ms, each answer kept (an enqueue that
        // failed may or may not be stored: not acknowledged either way).
        const refused: Array<{ job: number; tag: string }> = []
        let acceptedSince = 0
        const producing$ = (async () => {
          for (let job = 100_001; producing; job++) {
            const result = await runtime.runPromise(Effect.either(Effect.timeout(
              Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue(KIND, { job, ms: 50 })),
              "60 seconds" // above the client-side statement timeout (30 s), which fails it typed
            )))
            if (Either.isRight(result)) {
              acknowledged.push(job)
              acceptedSince++
            } else {
              refused.push({ job, tag: result.left._tag })
            }
            await delay(25)
          }
        })()

        // One failover: mid-drain (a third of a backlog done since `doneBefore`,
        // and a long run started in the last LONG_MS - LEASE_MS - 1 s: it would
        // outlive the lease), the primary crashes; `holdMs` later (an HA tool's
        // detection) the standby is promoted and the proxy switched to it.
        const failOver = async (from: Cluster, to: Cluster, doneBefore: number, holdMs: number, vanish: boolean) => {
          // A silent connection holds what waits on it for the statement timeout
          // (30 s), and one part of a worker may meet two in turn.
          const backWithinMs = vanish ? 120_000 : 60_000
          const db = pgPool(from.url("docket_rel"))
          pools.push(db)
          await waitFor("a third of the backlog done, a long run just started", async () => {
            const recent = Date.now() - (LONG_MS - LEASE_MS - 1000)
            return readRuns(logs).some((r) => r.endedAt === null && r.job % LONG_EVERY === 0 && r.startedAt > recent) &&
              (await pgCount(db, "SELECT count(*) AS n FROM docket_done")) >= doneBefore + BACKLOG / 3
          }, 60_000, 20)
          const running = runsOpen(logs)
          const stopAt = Date.now()
          phase(`stopping the primary${vanish ? ", its host vanished" : ""}`)
          if (vanish) proxy.vanish()
          await from.stop("immediate")
          await delay(holdMs)
          const promoteAt = Date.now()
          await to.promote()
          proxy.switchTo({ host: "127.0.0.1", port: to.port })
          const switchedAt = Date.now()
          phase("switched")
          acceptedSince = 0
          const fresh = pgPool(to.url("docket_rel"))
          pools.push(fresh)
          await waitFor("an item completed on the new primary", async () =>
            (await pgCount(fresh, "SELECT count(*) AS n FROM docket_done WHERE finished_at > $1", [switchedAt])) > 0, backWithinMs, 20)
          const firstDone = await pgCount(fresh, "SELECT min(finished_at) AS n FROM docket_done WHERE finished_at > $1", [switchedAt])
          await waitFor("every worker runs items again", () => {
            const since = new Set(readRuns(logs).filter((r) => r.startedAt > switchedAt).map((r) => r.pid))
            return pids.every((pid) => since.has(pid))
          }, backWithinMs, 50)
          await waitFor("the new primary acknowledges enqueues", () => acceptedSince >= 10, 60_000, 20)
          phase(`failed over (hold ${holdMs} ms)`)
          return {
            pool: fresh,
            stopAt,
            switchedAt,
            runningAtStop: running,
            stopMs: promoteAt - stopAt - holdMs,
            promoteMs: switchedAt - promoteAt,
            timeToResumeMs: firstDone - stopAt,
            switchToFirstDoneMs: firstDone - switchedAt,
            allWorkersBackMs: Date.now() - switchedAt
          }
        }

        // 1: the primary's process crashes (its connections are closed: the
        // workers hear of it at once), the standby is promoted at once.
        const first = await failOver(clusters[0], clusters[1], 0, 0, false)
        // The new primary gets a synchronous standby of its own, and a second backlog.
        clusters.push(await privateStandby(clusters[1], `${SLOT}_2`, { wal_receiver_status_interval: "1s" }))
        await makeSynchronous(clusters[1], `${SLOT}_2`)
        const doneBefore = await pgCount(first.pool, "SELECT count(*) AS n FROM docket_done")
        await backlog(200_001)
        phase("second standby made, second backlog enqueued")
        // 2: the standby is promoted two leases later (every lease in flight runs
        // out meanwhile); or the host vanishes (RELIABILITY_FAILOVER_VANISH=1).
        const vanish = process.env.RELIABILITY_FAILOVER_VANISH === "1"
        const second = await failOver(clusters[1], clusters[2], doneBefore, 2 * LEASE_MS, vanish)
        producing = false
        await producing$
        const fresh = second.pool
        await waitFor("the queue drained on the last primary", async () =>
          (await pgCount(fresh, "SELECT count(*) AS n FROM docket_items")) === 0, 120_000)
        phase("drained")

        const { rows } = await fresh.query<{ job: number; state: string }>(
          "SELECT (payload::jsonb->>'job')::int AS job, state FROM docket_items_all WHERE kind = $1", [KIND]
        )
        const stored = new Map<number, Array<string>>()
        for (const r of rows) stored.set(r.job, [...(stored.get(r.job) ?? []), r.state])
        const lost = acknowledged.filter((job) => !(stored.get(job) ?? []).includes("done"))
        const storedTwice = [...stored.values()].filter((states) => states.length > 1).length
        const runs = readRuns(logs)
        const runsByJob = new Map<number, number>()
        for (const r of runs) runsByJob.set(r.job, (runsByJob.get(r.job) ?? 0) + 1)
        const abortedIn = (from: number, to: number) =>
          runs.filter((r) => r.aborted && r.endedAt !== null && r.endedAt >= from && r.endedAt < to).length
        const figures = (f: typeof first, to: number): Record<string, number> => ({
          runningAtStop: f.runningAtStop,
          stopMs: f.stopMs,
          promoteMs: f.promoteMs,
          timeToResumeMs: f.timeToResumeMs,
          switchToFirstDoneMs: f.switchToFirstDoneMs,
          allWorkersBackMs: f.allWorkersBackMs,
          abortedRuns: abortedIn(f.stopAt, to)
        })
        const prefixed = (prefix: string, o: Record<string, number>) =>
          Object.fromEntries(Object.entries(o).map(([k, v]) => [`${prefix}.${k}`, v]))
        report("failover (synchronous standby promoted twice, workers through a TCP proxy)", {
          leaseMs: LEASE_MS,
          workers: WORKERS,
          ...prefixed("atOnce", figures(first, second.stopAt)),
          ...prefixed(vanish ? "vanishAfter2Leases" : "after2Leases", figures(second, Infinity)),
          acknowledged: acknowledged.length,
          refusedEnqueues: refused.length,
          refusedButStored: refused.filter((r) => stored.has(r.job)).length,
          lost: lost.length,
          storedTwice,
          runs: runs.length,
          jobsRunTwice: [...runsByJob.values()].filter((n) => n > 1).length,
          overlappingRuns: overlapping(runs).length,
          workerStorageErrors: workers.map((w) => w.counted()).join("/"),
          leaseLostLines: workers.flatMap((w) => w.kept.filter((l) => /lease lost/.test(l))).length,
          workersRestarted: workers.filter((w) => !w.alive()).length
        })
        // Nothing acknowledged lost, one item per enqueue, every item done.
        expect(lost).toEqual([])
        expect(storedTwice).toBe(0)
        expect(refused.length).toBeGreaterThan(0)
        expect(refused.every((r) => r.tag === "StorageError")).toBe(true)
        // The same processes throughout (each ran items after each switch: failOver waited for it), and no others.
        for (const w of workers) expect(w.alive(), `worker ${w.pid} still running`).toBe(true)
        expect([...new Set(runs.map((r) => r.pid))].sort()).toEqual(pids)
        // The second outage outlasted the leases: runs were stopped, and ran again.
        expect(abortedIn(second.stopAt, Infinity)).toBeGreaterThan(0)
        // No two runs of an item at once, and every run ended.
        expect(runs.filter((r) => r.endedAt === null)).toEqual([])
        expect(overlapping(runs)).toEqual([])
        const exits = await Promise.all(workers.map((w) => stopWorker(w)))
        for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null })
      } finally {
        producing = false
        await Promise.all(workers.map((w) => stopWorker(w, 5000)))
        await runtime.dispose().catch(() => undefined)
        await Promise.all(pools.map((p) => p.end().catch(() => undefined)))
        await proxy.close()
        await Promise.all(clusters.map((c) => c.destroy()))
        rmSync(logs, { recursive: true, force: true })
      }
    }, 300_000)

    asyncLossCase()
  })
