/**
 * Database restart: two `docket worker` processes drain jobs on a PostgreSQL
 * cluster of this test's own (restarting the shared server would break the
 * other tests), while this process keeps enqueueing. In the middle of the
 * drain the server goes down twice: a clean stop (`pg_ctl stop -m fast`) held
 * for two lease lengths (leases run out while it is down), and a crash
 * (`-m immediate`: WAL replayed at start) held until the enqueuer has seen its
 * enqueues refused; then it starts again.
 *
 * Checked: every enqueue during an outage fails with a typed `StorageError`
 * (none hangs, none throws); the workers reconnect by themselves and finish;
 * every accepted job runs; no refused job was stored anyway.
 */
import { Effect, Either, ManagedRuntime } from "effect"
import { describe, expect, it } from "vitest"
import * as Docket from "../../src/Docket.js"
import { StorageError } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { EXECUTIONS_TABLE, enqueueJobs } from "./kill.js"
import {
  delay,
  fixture,
  IN_CI,
  killWorker,
  pgCount,
  pgPool,
  type PrivateCluster,
  privateCluster,
  report,
  scaled,
  startWorker,
  stopWorker,
  waitFor,
  type WorkerProcess,
  withDatabase
} from "./support.js"

interface Attempt {
  readonly job: number
  readonly at: number
  readonly outcome: "accepted" | "refused"
  readonly ms: number
  readonly error?: string
}

/** Counts a query's rows, or -1 while the server is down. */
const tryCount = async (pool: ReturnType<typeof pgPool>, text: string) => {
  try {
    return await pgCount(pool, text)
  } catch {
    return -1
  }
}

export const restartScenario = () =>
  describe("database restart in the middle of a drain (a private PostgreSQL cluster)", () => {
    it("enqueues during the outage fail typed; workers reconnect and finish; nothing accepted is lost", async () => {
      let cluster: PrivateCluster
      try {
        cluster = await privateCluster()
      } catch (error) {
        if (IN_CI) throw error
        console.warn(`RELIABILITY: restart scenario skipped: cannot make a private PostgreSQL cluster (${String(error)})`)
        return
      }
      const initial = scaled(2000, 100)
      const leaseMs = 3000
      const admin = pgPool(cluster.adminUrl)
      const workers: Array<WorkerProcess> = []
      let runtime: ManagedRuntime.ManagedRuntime<QueueRepo.QueueRepo, unknown> | undefined
      let pool: ReturnType<typeof pgPool> | undefined
      let stopEnqueuer = () => {}
      try {
        await admin.query("CREATE DATABASE docket_rel")
        await admin.end()
        const url = withDatabase(cluster.adminUrl, "docket_rel")
        pool = pgPool(url)
        const db = pool
        await enqueueJobs(url, "rel.record", initial, () => 5 + Math.floor(Math.random() * 25))
        await db.query(EXECUTIONS_TABLE)

        // The enqueuer: one item every 20 ms, each outcome recorded.
        const repoRuntime = ManagedRuntime.make(Docket.layerClient(url))
        runtime = repoRuntime
        const attempts: Array<Attempt> = []
        const badErrors: Array<string> = []
        let running = true
        stopEnqueuer = () => {
          running = false
        }
        const enqueuer = (async () => {
          let job = initial
          while (running) {
            job++
            const at = Date.now()
            const result = await repoRuntime.runPromise(
              Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue("rel.record", { job, ms: 5 })).pipe(
                Effect.timeout("20 seconds"),
                Effect.either
              )
            )
            if (Either.isRight(result)) {
              attempts.push({ job, at, outcome: "accepted", ms: Date.now() - at })
            } else {
              const error = result.left
              if (!(error instanceof StorageError) || error._tag !== "StorageError") {
                badErrors.push(`job ${job}: ${String((error as { _tag?: string })._tag)}: ${String(error)}`)
              }
              attempts.push({ job, at, outcome: "refused", ms: Date.now() - at, error: error.message })
            }
            await delay(20)
          }
        })()
        const refusedSince = (t: number) => attempts.filter((a) => a.at >= t && a.outcome === "refused").length
        const acceptedSince = (t: number) => attempts.filter((a) => a.at >= t && a.outcome === "accepted").length

        for (let i = 0; i < 2; i++) {
          workers.push(startWorker({
            database: url,
            tasks: fixture("record"),
            args: ["--lease", `${leaseMs}ms`, "--poll", "500ms"],
            env: { RELIABILITY_EXEC_URL: url },
            count: /storage error in /
          }))
        }
        await Promise.all(workers.map((w) => w.ready(60_000)))
        await waitFor("a third of the jobs run", async () =>
          (await tryCount(db, "SELECT count(DISTINCT job) AS n FROM rel_executions")) >= initial / 3, 120_000)

        const outages: Array<{ mode: string; refused: number; downMs: number; reconnectMs: number; workersBackMs: number }> = []
        for (const mode of ["fast", "immediate"] as const) {
          const down = Date.now()
          await cluster.stop(mode)
          const errorsBefore = workers.map((w) => w.counted())
          await waitFor(`enqueues refused while the server is down (${mode})`, () => refusedSince(down) >= 5, 60_000, 20)
          if (mode === "fast") {
            // The first outage outlasts two leases, and both workers have seen it
            // (each printed a storage error): leases run out while the server is down.
            await waitFor("both workers report storage errors", () => workers.every((w, i) => w.counted() > errorsBefore[i]), 60_000, 20)
            await waitFor("two leases pass", () => Date.now() - down >= 2 * leaseMs, 60_000, 20)
          }
          await cluster.start()
          const started = Date.now()
          await waitFor(`an enqueue accepted after the restart (${mode})`, () => acceptedSince(started) >= 1, 60_000, 20)
          const reconnected = Date.now()
          await waitFor(`both workers run jobs again after the restart (${mode})`, async () => {
            try {
              const { rows } = await db.query<{ worker: string }>(
                "SELECT DISTINCT worker FROM rel_executions WHERE started_at > $1",
                [started]
              )
              return workers.every((w) => rows.some((r) => r.worker === w.name))
            } catch {
              return false
            }
          }, 60_000)
          outages.push({
            mode,
            refused: refusedSince(down),
            downMs: started - down,
            reconnectMs: reconnected - started,
            workersBackMs: Date.now() - started
          })
        }
        // A few more accepted after the last restart, then the enqueuer stops.
        const last = Date.now()
        await waitFor("enqueues accepted after the last restart", () => acceptedSince(last) >= 20, 60_000, 20)
        stopEnqueuer()
        await enqueuer

        const accepted = attempts.filter((a) => a.outcome === "accepted").map((a) => a.job)
        const refused = attempts.filter((a) => a.outcome === "refused").map((a) => a.job)
        await waitFor("the queue drained", async () => (await tryCount(db, "SELECT count(*) AS n FROM docket_items WHERE state <> 'done'")) === 0, 180_000)

        // The workers are still the same two processes, and stop gracefully.
        for (const w of workers) expect(w.alive(), `worker ${w.name} still running`).toBe(true)
        const exits = await Promise.all(workers.map((w) => stopWorker(w)))
        for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null })

        const { rows } = await db.query<{ job: number }>(
          "SELECT DISTINCT job FROM rel_executions WHERE finished_at IS NOT NULL"
        )
        const done = new Set(rows.map((r) => r.job))
        const lost = [...Array.from({ length: initial }, (_, i) => i + 1), ...accepted].filter((job) => !done.has(job))
        const refusedButStored = refused.filter((job) => done.has(job))
        const executions = await pgCount(db, "SELECT count(*) AS n FROM rel_executions")
        const jobs = initial + accepted.length
        report("database restart", {
          jobs,
          enqueuedDuringRun: accepted.length,
          refusedEnqueues: refused.length,
          refusedButStored: refusedButStored.length,
          maxRefusalMs: Math.max(0, ...attempts.filter((a) => a.outcome === "refused").map((a) => a.ms)),
          untypedErrors: badErrors.length,
          restarts: outages.length,
          duplicates: executions - done.size,
          ...Object.fromEntries(outages.flatMap((o) => [
            [`${o.mode}DownMs`, o.downMs],
            [`${o.mode}EnqueueBackMs`, o.reconnectMs],
            [`${o.mode}WorkersBackMs`, o.workersBackMs]
          ])),
          lost: lost.length
        })
        expect(badErrors).toEqual([])
        expect(refused.length).toBeGreaterThanOrEqual(10)
        expect(lost).toEqual([])
        expect(refusedButStored).toEqual([])
      } finally {
        stopEnqueuer()
        await Promise.all(workers.map((w) => killWorker(w)))
        await runtime?.dispose().catch(() => undefined)
        await pool?.end().catch(() => undefined)
        await cluster.destroy()
      }
    }, 360_000)
  })
