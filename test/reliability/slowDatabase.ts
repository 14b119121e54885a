/**
 * A slow database: two `docket worker` processes (lease 3 s) on PostgreSQL
 * through the test's TCP proxy (proxy.ts). They drain short jobs at full speed,
 * then every statement is delayed by 200 ms on its way to the server (answers
 * are not), and they drain the same number of short jobs again, then run jobs
 * lasting more than two leases.
 *
 * Checked: no lease is lost and nothing runs twice (renewals are sent every
 * third of the lease, and a lease counts from the renewal's send, so a slow
 * answer never stretches it); throughput degrades, without failing (jobs/s
 * with and without the delay, in the same test); and a third worker whose
 * lease (1 s) is too short for that round trip logs the warning once, naming
 * the lease to use.
 */
import { describe, expect, it } from "vitest"
import { freshPgDatabase } from "../support/db.js"
import { enqueueJobs } from "./kill.js"
import { readRuns, RUNS_TABLE } from "./partition.js"
import { startProxy } from "./proxy.js"
import { fixture, pgCount, pgPool, report, startWorker, stopWorker, waitFor, type WorkerProcess } from "./support.js"

const LEASE_MS = 3000
const DELAY_MS = 200
const WARM_UP = 100
const SHORT_JOBS = 400
const SHORT_MS = 5
const LONG_JOBS = 4
const LONG_MS = 7000

export const slowDatabaseScenario = () =>
  describe("slow database: every statement delayed by 200 ms (TCP proxy)", () => {
    it("leases are renewed in time, nothing runs twice, throughput degrades gracefully, a too-short lease is warned of", async () => {
      const db = await freshPgDatabase()
      const target = new URL(db.url)
      const proxy = await startProxy({ host: target.hostname, port: Number(target.port || 5432) })
      const pool = pgPool(db.url)
      const workers: Array<WorkerProcess> = []
      const done = () => pgCount(pool, "SELECT count(*) AS n FROM docket_items_all WHERE state = 'done'")
      // Enqueued straight to the database in one statement; timed from its commit until every item is done.
      const drain = async (n: number, ms: number, alreadyDone: number) => {
        await enqueueJobs(db.url, "rel.part", n, () => ms)
        const started = performance.now()
        await waitFor(`${n} items done`, async () => (await done()) >= alreadyDone + n, 90_000, 20)
        return performance.now() - started
      }
      try {
        await pool.query(RUNS_TABLE)
        for (let i = 0; i < 2; i++) {
          workers.push(startWorker({
            database: proxy.url(db.url),
            tasks: fixture("partition"),
            args: ["--lease", `${LEASE_MS}ms`, "--poll", "500ms", "--concurrency", "8"],
            env: { RELIABILITY_EXEC_URL: db.url },
            keep: /lease lost|lease renewal took|storage error/,
            count: /lease lost/
          }))
        }
        await Promise.all(workers.map((w) => w.ready(60_000)))

        // Full speed, after a warm-up (the first items pay for cold code paths and connections).
        await drain(WARM_UP, SHORT_MS, 0)
        const fastMs = await drain(SHORT_JOBS, SHORT_MS, WARM_UP)

        // Every statement 200 ms late; long jobs among the short ones, and the short-lease worker.
        proxy.delay(DELAY_MS)
        const warned = startWorker({
          database: proxy.url(db.url),
          tasks: fixture("slowwarn"),
          args: ["--lease", "1s", "--poll", "500ms", "--concurrency", "1"],
          env: { RELIABILITY_EXEC_URL: db.url },
          keep: /lease renewal took/
        })
        workers.push(warned)
        await warned.ready(60_000)
        const slowMs = await drain(SHORT_JOBS, SHORT_MS, WARM_UP + SHORT_JOBS)
        // Then, still 200 ms late, jobs lasting more than two leases (after the timed drain: they would take slots from it).
        await enqueueJobs(db.url, "rel.part", LONG_JOBS, () => LONG_MS)
        await enqueueJobs(db.url, "rel.warn", 1, () => 3000)
        // (A log line, on stderr: waited for among the kept lines.)
        const warningLine = () => warned.kept.find((l) => /lease renewal took/.test(l))
        await waitFor("the short-lease worker's warning", () => warningLine() !== undefined, 15_000).catch(() => undefined)
        const warning = warningLine()
        await waitFor("the long jobs done", async () => (await done()) === WARM_UP + 2 * SHORT_JOBS + LONG_JOBS + 1, 60_000)

        const runs = await readRuns(pool)
        const fleet = new Set(workers.slice(0, 2).map((w) => w.pid))
        const fleetRuns = runs.filter((r) => fleet.has(r.pid))
        const perItem = new Map<number, number>()
        for (const r of fleetRuns) perItem.set(r.itemId, (perItem.get(r.itemId) ?? 0) + 1)
        const twice = [...perItem.values()].filter((n) => n > 1).length
        const leaseLost = workers.slice(0, 2).reduce((n, w) => n + w.counted(), 0)
        const warningsOnFleet = workers.slice(0, 2).flatMap((w) => w.kept.filter((l) => /lease renewal took/.test(l))).length
        const longRuns = fleetRuns.filter((r) => r.finishedAt !== null && r.finishedAt - r.startedAt >= LONG_MS)
        // Every item enqueued is done in the store (the drains waited for it; counted again here for the figure).
        const lost = WARM_UP + 2 * SHORT_JOBS + LONG_JOBS + 1 - (await done())
        const fastRate = SHORT_JOBS / (fastMs / 1000)
        const slowRate = SHORT_JOBS / (slowMs / 1000)
        report("slow database (every statement +200 ms, PostgreSQL through a TCP proxy)", {
          leaseMs: LEASE_MS,
          delayMs: DELAY_MS,
          jobs: SHORT_JOBS,
          fastJobsPerSec: Math.round(fastRate),
          slowJobsPerSec: Math.round(slowRate),
          slowdown: `${(fastRate / slowRate).toFixed(1)}x`,
          longJobs: LONG_JOBS,
          longJobMs: LONG_MS,
          longJobsRunOnce: longRuns.length,
          leaseLost,
          itemsRunTwice: twice,
          fleetRenewalWarnings: warningsOnFleet,
          shortLeaseWarned: warning !== undefined,
          proxyConnections: proxy.connections().accepted,
          lost
        })
        if (warning !== undefined) console.log(`RELIABILITY: slow database: the 1 s lease worker said: ${warning}`)
        // Leases renewed in time: none lost, nothing run twice, every long job done in one run.
        expect(leaseLost).toBe(0)
        expect(twice).toBe(0)
        expect(longRuns).toHaveLength(LONG_JOBS)
        expect(perItem.size).toBe(WARM_UP + 2 * SHORT_JOBS + LONG_JOBS)
        expect(lost).toBe(0)
        // Degrades, and still drains at a useful pace (claims and outcomes go in batches).
        expect(slowRate).toBeGreaterThan(10)
        // The lease too short for the round trip is warned of, once.
        expect(warning, "the 1 s lease worker warns that its lease is too short for the round trip").toBeDefined()
        expect(warned.kept.filter((l) => /lease renewal took/.test(l))).toHaveLength(1)
      } finally {
        proxy.delay(0)
        await Promise.all(workers.map((w) => stopWorker(w)))
        await proxy.close()
        await pool.end()
        await db.drop()
      }
    }, 150_000)
  })
