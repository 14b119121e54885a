/**
 * A partition: three `docket worker` processes on PostgreSQL reach it through
 * a TCP proxy of the test's own (proxy.ts). In the middle of their work the
 * proxy stops forwarding in both directions and keeps every socket open:
 * packets vanish, nothing is refused, nothing answers. The partition lasts
 * three leases (and until the worker stopped during it has exited).
 *
 * Checked: each worker notices within about a lease (its renewal gets no
 * answer: logged) and interrupts the runs whose lease it can no longer prove
 * (the handler's `job.signal` aborts); a SIGTERM sent to one worker during the
 * partition exits within the grace plus the shutdown's database budget (10 s),
 * not when TCP gives up; after the heal the other two resume by themselves
 * (same processes) and every item is done exactly once in the store, nothing
 * lost; no two runs of an item overlap. Runs may repeat (a lost lease is run
 * again): counted, with the reason.
 */
import { describe, expect, it } from "vitest"
import { SHUTDOWN_DB_MS } from "../../src/internal/worker/bounded.js"
import { freshPgDatabase } from "../support/db.js"
import { enqueueJobs } from "./kill.js"
import { startProxy } from "./proxy.js"
import { delay, fixture, pgCount, pgPool, report, startWorker, stopWorker, waitFor, type WorkerProcess } from "./support.js"

export const RUNS_TABLE = `
CREATE TABLE rel_part_runs (
  id          bigserial PRIMARY KEY,
  job         integer NOT NULL,
  item_id     bigint  NOT NULL,
  attempt     integer NOT NULL,
  worker      text    NOT NULL,
  pid         integer NOT NULL,
  started_at  bigint  NOT NULL,
  finished_at bigint,
  aborted_at  bigint
)`

export interface Run {
  readonly itemId: number
  readonly pid: number
  readonly startedAt: number
  readonly finishedAt: number | null
  readonly abortedAt: number | null
}

export const readRuns = async (pool: ReturnType<typeof pgPool>): Promise<Array<Run>> =>
  (await pool.query<{ item_id: string; pid: number; started_at: string; finished_at: string | null; aborted_at: string | null }>(
    "SELECT item_id, pid, started_at, finished_at, aborted_at FROM rel_part_runs ORDER BY started_at"
  )).rows.map((r) => ({
    itemId: Number(r.item_id),
    pid: r.pid,
    startedAt: Number(r.started_at),
    finishedAt: r.finished_at === null ? null : Number(r.finished_at),
    abortedAt: r.aborted_at === null ? null : Number(r.aborted_at)
  }))

/** Runs of one item that overlap in time (a run cut off by its process's exit has no end: not counted). */
export const overlaps = (runs: ReadonlyArray<Run>): number => {
  const byItem = new Map<number, Array<Run>>()
  for (const r of runs) byItem.set(r.itemId, [...(byItem.get(r.itemId) ?? []), r])
  let n = 0
  for (const list of byItem.values()) {
    for (let i = 1; i < list.length; i++) {
      const end = list[i - 1].finishedAt ?? list[i - 1].abortedAt
      if (end !== null && end > list[i].startedAt) n++
    }
  }
  return n
}

const LEASE_MS = 2000
const GRACE_MS = 2000
const JOB_MS = 5000
const JOBS = 16
const CONCURRENCY = 4

export const partitionScenario = () =>
  describe("partition: the database goes silent for longer than a lease (TCP proxy)", () => {
    it("workers stop runs they cannot prove, SIGTERM exits bounded, survivors resume, each item done once", async () => {
      const db = await freshPgDatabase()
      const target = new URL(db.url)
      const proxy = await startProxy({ host: target.hostname, port: Number(target.port || 5432) })
      const pool = pgPool(db.url)
      const workers: Array<WorkerProcess> = []
      try {
        await pool.query(RUNS_TABLE)
        for (let i = 0; i < 3; i++) {
          workers.push(startWorker({
            database: proxy.url(db.url),
            tasks: fixture("partition"),
            args: ["--lease", `${LEASE_MS}ms`, "--grace", `${GRACE_MS}ms`, "--poll", "500ms", "--concurrency", String(CONCURRENCY)],
            env: { RELIABILITY_EXEC_URL: db.url },
            keep: /lease lost|extend lease|not recorded|not given back|still running|docket worker stop/
          }))
        }
        await Promise.all(workers.map((w) => w.ready(60_000)))
        await enqueueJobs(db.url, "rel.part", JOBS, () => JOB_MS)
        const open = "SELECT count(*) AS n FROM rel_part_runs WHERE finished_at IS NULL AND aborted_at IS NULL"
        await waitFor("runs in progress on every worker", async () => {
          const n = await pgCount(pool, "SELECT count(DISTINCT pid) AS n FROM rel_part_runs WHERE finished_at IS NULL")
          return n === 3 && (await pgCount(pool, open)) >= 3 * CONCURRENCY - 2
        }, 30_000, 50)

        // --- the partition ---
        const partitionAt = Date.now()
        proxy.partition()
        const runningAtPartition = (await readRuns(pool)).filter((r) => r.finishedAt === null && r.abortedAt === null)
        const [victim, ...survivors] = workers
        await delay(300)
        const sigtermAt = Date.now()
        victim.child.kill("SIGTERM")
        // Whether the exit was seen before the heal, by program order: the exit
        // often ends the wait below, and the heal follows within the same
        // millisecond, so comparing Date.now() stamps could tie.
        let exitSeen = false
        const victimExit = victim.exited.then((exit) => {
          exitSeen = true
          return { ...exit, at: Date.now() }
        })
        // Each survivor notices: its renewal gets no answer (logged). Its runs are
        // stopped (a run that ends before its lease would have run out need not be).
        const lostLine = (w: WorkerProcess) =>
          w.waitForLine(/lease lost rel\.part/, 4 * LEASE_MS).then(() => Date.now() - partitionAt, () => undefined)
        const lostLines = survivors.map(lostLine)
        const detected = await Promise.all(survivors.map((w) =>
          w.waitForLine(/storage error in extend lease/, 4 * LEASE_MS).then(() => Date.now() - partitionAt)
        ))
        const leaseLostMs = (await Promise.all(lostLines)).filter((ms): ms is number => ms !== undefined)
        // Every run in progress at the partition ends: aborted (its lease could not be proven), or finished.
        const survivorPids = new Set(survivors.map((w) => w.pid))
        await waitFor("the runs of the survivors in progress at the partition ended", async () => {
          const ids = new Set(runningAtPartition.filter((r) => survivorPids.has(r.pid)).map((r) => r.startedAt * 1e6 + r.itemId))
          const runs = await readRuns(pool)
          return runs.filter((r) => ids.has(r.startedAt * 1e6 + r.itemId)).every((r) => r.finishedAt !== null || r.abortedAt !== null)
        }, 4 * LEASE_MS, 50)
        // Held until the stopped worker exited (or surely should have), and at least three leases.
        // (The budget, then up to 1 s for each of the three closings after it.)
        const stopBoundMs = GRACE_MS + SHUTDOWN_DB_MS + 3000
        await Promise.race([victimExit, delay(stopBoundMs)])
        await delay(Math.max(0, partitionAt + 3 * LEASE_MS - Date.now()))
        const healAt = Date.now()
        const exitedBeforeHeal = exitSeen
        proxy.heal()

        // --- after the heal ---
        await waitFor(`all ${JOBS} items done`, async () =>
          (await pgCount(pool, "SELECT count(*) AS n FROM docket_items_all WHERE state = 'done'")) === JOBS, 60_000)
        const runs = await readRuns(pool)
        const exit = await Promise.race([victimExit, delay(1000).then(() => undefined)])
        if (process.env.RELIABILITY_DEBUG) console.log(`victim (SIGTERM at ${new Date(sigtermAt).toISOString()}):\n${victim.tail()}`)
        const duringPartition = runs.filter((r) => r.abortedAt !== null && r.abortedAt >= partitionAt && r.abortedAt < healAt)
        const survivorAborts = duringPartition.filter((r) => survivorPids.has(r.pid))
        const interruptMs = survivorAborts.map((r) => r.abortedAt! - partitionAt)
        const firstAfterHeal = runs.find((r) => r.startedAt >= healAt && survivorPids.has(r.pid))
        const items = await pool.query<{ id: string; state: string; attempts: number }>(
          "SELECT id, state, attempts FROM docket_items_all"
        )
        const runsByItem = new Map<number, Array<Run>>()
        for (const r of runs) runsByItem.set(r.itemId, [...(runsByItem.get(r.itemId) ?? []), r])
        const twice = [...runsByItem.values()].filter((list) => list.length > 1)
        // Why each repeated run came: how the run before it ended.
        const reasons = { leaseLost: 0, shutdown: 0, finishedOutcomeRefused: 0, cutByExit: 0 }
        for (const list of twice) {
          for (const r of list.slice(0, -1)) {
            if (r.abortedAt !== null) reasons[r.pid === victim.pid ? "shutdown" : "leaseLost"]++
            else if (r.finishedAt !== null) reasons.finishedOutcomeRefused++
            else reasons.cutByExit++
          }
        }
        const lost = items.rows.filter((i) => i.state !== "done").length + (JOBS - items.rows.length)
        const stopMs = exit === undefined ? -1 : exit.at - sigtermAt
        report("partition (PostgreSQL through a TCP proxy)", {
          leaseMs: LEASE_MS,
          graceMs: GRACE_MS,
          partitionMs: healAt - partitionAt,
          runningAtPartition: runningAtPartition.length,
          detectRenewFailMs: Math.max(...detected),
          detectLeaseLostMs: leaseLostMs.length === 0 ? -1 : Math.max(...leaseLostMs),
          interruptedRuns: survivorAborts.length,
          interruptMaxMs: interruptMs.length === 0 ? -1 : Math.max(...interruptMs),
          sigtermStopMs: stopMs,
          sigtermExit: exit === undefined ? "none" : String(exit.code ?? exit.signal),
          resumeAfterHealMs: firstAfterHeal === undefined ? -1 : firstAfterHeal.startedAt - healAt,
          items: JOBS,
          done: items.rows.filter((i) => i.state === "done").length,
          lost,
          runs: runs.length,
          itemsRunTwice: twice.length,
          againAfterLeaseLost: reasons.leaseLost,
          againAfterShutdown: reasons.shutdown,
          againAfterFinishedUnrecorded: reasons.finishedOutcomeRefused,
          againAfterExitCut: reasons.cutByExit,
          overlappingRuns: overlaps(runs),
          proxyConnections: proxy.connections().accepted
        })
        // Noticed, and the runs stopped, within about a lease (plus a renewal round and a margin).
        for (const ms of [...detected, ...leaseLostMs]) expect(ms).toBeLessThan(LEASE_MS * 1.5 + 1500)
        expect(survivorAborts.length).toBeGreaterThan(0)
        expect(Math.max(...interruptMs)).toBeLessThan(LEASE_MS * 1.5 + 1500)
        // SIGTERM during the partition: exits within the grace plus the shutdown's budget, cleanly.
        expect(exit, "the worker stopped during the partition exited").toBeDefined()
        expect(stopMs).toBeLessThan(stopBoundMs)
        expect(exit!.code).toBe(0)
        expect(exitedBeforeHeal, "it exited during the partition, not at the heal").toBe(true)
        // The survivors resumed by themselves: the same processes, running items again.
        for (const w of survivors) expect(w.alive()).toBe(true)
        expect(firstAfterHeal).toBeDefined()
        // Each item done once in the store, nothing lost, no two runs of an item at once.
        expect(items.rows).toHaveLength(JOBS)
        expect(lost).toBe(0)
        expect(overlaps(runs)).toBe(0)
      } finally {
        proxy.heal()
        await Promise.all(workers.map((w) => stopWorker(w)))
        await proxy.close()
        await pool.end()
        await db.drop()
      }
    }, 120_000)
  })
