/**
 * Rolling restart: three `docket worker` processes on PostgreSQL drain the
 * jobs (each working 5-50 ms); every half second a driver stops a random
 * worker gracefully (SIGTERM, as a deploy does) and starts a new one. The task
 * records every execution.
 *
 * At the end: every job ran exactly once. A graceful stop lets its running
 * items finish, gives back what it prefetched (attempt not counted) and writes
 * every outcome it holds, so unlike a kill it never makes an item run again;
 * each stop exits 0 within its grace.
 */
import { describe, expect, it } from "vitest"
import { EXECUTIONS_TABLE, enqueueJobs, readExecutions } from "./kill.js"
import { driveUntilDrained, fixture, killWorker, pgCount, pgPool, report, scaled, startWorker, stopWorker, type WorkerProcess } from "./support.js"
import { freshPgDatabase, pgAvailable } from "../support/db.js"

export const rollingScenario = () =>
  describe.skipIf(!pgAvailable)("rolling restart: SIGTERM a random worker every half second (PostgreSQL)", () => {
    it("runs every job exactly once; every stop exits 0", async () => {
      // At least 2,000 even when scaled down, or the drain could end before the first stops.
      const jobs = scaled(8000, 2000)
      const stopEveryMs = 500
      const started = performance.now()
      const db = await freshPgDatabase()
      const pool = pgPool(db.url)
      const everyWorker: Array<WorkerProcess> = []
      try {
        await enqueueJobs(db.url, "rel.record", jobs, () => 5 + Math.floor(Math.random() * 45))
        await pool.query(EXECUTIONS_TABLE)

        const live = new Set<WorkerProcess>()
        const spawnOne = () => {
          const worker = startWorker({
            database: db.url,
            tasks: fixture("record"),
            // A lease long enough that no run loses it on a busy machine: a
            // duplicate here can only come from the stops.
            args: ["--lease", "20s", "--poll", "500ms", "--concurrency", "10", "--grace", "10s"],
            env: { RELIABILITY_EXEC_URL: db.url }
          })
          live.add(worker)
          everyWorker.push(worker)
          return worker
        }
        const first = [spawnOne(), spawnOne(), spawnOne()]
        await Promise.all(first.map((w) => w.ready(60_000)))

        const stops: Array<Promise<{ readonly exit: { code: number | null; signal: NodeJS.Signals | null }; readonly ms: number }>> = []
        const { skippedTicks } = await driveUntilDrained({
          pool,
          live,
          everyMs: stopEveryMs,
          act: (victim) => {
            live.delete(victim)
            spawnOne()
            const at = performance.now()
            stops.push(stopWorker(victim).then((exit) => ({ exit, ms: performance.now() - at })))
          }
        })
        const drainedMs = performance.now() - started
        const stopped = await Promise.all(stops)
        const survivors = [...live]
        await Promise.all(survivors.map((w) => w.ready(60_000)))
        const exits = [...stopped.map((s) => s.exit), ...(await Promise.all(survivors.map((w) => stopWorker(w))))]
        for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null })

        // Nothing left but done items (kept by this release's workers; the older release deletes them).
        expect(await pgCount(pool, "SELECT count(*) AS n FROM docket_items WHERE state <> 'done'")).toBe(0)
        const byJob = await readExecutions(pool)
        let lost = 0
        const twice: Array<string> = []
        for (let job = 1; job <= jobs; job++) {
          const runs = byJob.get(job) ?? []
          if (!runs.some((r) => r.finishedAt !== null)) lost++
          if (runs.length > 1) twice.push(`job ${job}: ${runs.map((r) => `${r.worker} attempt ${r.attempt}`).join(", ")}`)
        }
        report("rolling", {
          jobs,
          workers: everyWorker.length,
          stops: stops.length,
          skippedTicks,
          maxStopMs: Math.round(Math.max(0, ...stopped.map((s) => s.ms))),
          duplicates: twice.length,
          lost,
          drainS: Math.round(drainedMs / 100) / 10
        })
        expect(stops.length).toBeGreaterThan(0)
        // Each stop within its grace: its running items (5-50 ms) finished, nothing was cut off.
        for (const stop of stopped) expect(stop.ms).toBeLessThan(10_000)
        expect(lost).toBe(0)
        expect(twice).toEqual([])
      } finally {
        await Promise.all(everyWorker.map((w) => killWorker(w)))
        await pool.end()
        await db.drop()
      }
    }, 360_000)
  })
