/**
 * Poison items: two items whose handler takes its whole process down on every
 * run, one with `process.exit(1)`, one by running out of memory (the workers
 * run with `--max-old-space-size=64`; V8 aborts the process at the heap
 * limit), each enqueued with `maxAttempts` 3, the second once the first is
 * dead. Three `docket worker` processes on PostgreSQL run them beside ordinary
 * items that the test keeps enqueueing; a supervisor in the test restarts
 * every worker that dies, as systemd would.
 *
 * Checked: each poison item ends dead with `LeaseExpired: attempt 4 of 3 ...`
 * after exactly its 3 attempts, every one of which crashed a process (counted
 * from the processes' exits, matched to the runs they had started); no other
 * process crashes and no poison item runs once dead, so then the workers stay
 * up; every ordinary item is done; nothing is lost.
 */
import { Effect, ManagedRuntime } from "effect"
import { describe, expect, it } from "vitest"
import * as QueueRepo from "../../src/QueueRepo.js"
import { freshDir, freshPgDatabase, pgAvailable, repoLayer } from "../support/db.js"
import { readRuns } from "./controlRuns.js"
import { delay, fixture, killWorker, pgPool, report, startWorker, stopWorker, waitFor, type WorkerProcess } from "./support.js"

const LEASE_MS = 2000
const POLL_MS = 300
const MAX_ATTEMPTS = 3
const WORKERS = 3

interface Exit {
  readonly pid: number
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly at: number
}

interface PoisonRow {
  readonly id: string
  readonly state: string
  readonly attempts: number
  readonly last_error: string | null
}

export const poisonScenario = () =>
  describe.skipIf(!pgAvailable)("poison items that crash their process (exit, out of memory)", () => {
    it("each goes dead after its attempts, one crash per attempt; the other items all run", async () => {
      const db = await freshPgDatabase()
      const logs = freshDir()
      const pool = pgPool(db.url)
      const runtime = ManagedRuntime.make(repoLayer(db.url))
      const enqueue = (kind: string, payload: unknown, options?: QueueRepo.EnqueueOptions) =>
        runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue(kind, payload, options)))

      // The supervisor: every worker that exits while the test runs is replaced.
      const exits: Array<Exit> = []
      const every: Array<WorkerProcess> = []
      const live = new Set<WorkerProcess>()
      let supervising = true
      const spawnOne = (): WorkerProcess => {
        const worker = startWorker({
          database: db.url,
          tasks: fixture("poison"),
          nodeArgs: ["--max-old-space-size=64"],
          args: ["--lease", `${LEASE_MS}ms`, "--poll", `${POLL_MS}ms`, "--concurrency", "4"],
          env: { CONTROL_LOG_DIR: logs.dir },
          keep: /^stderr: .*(heap|memory)|dead rel\.poison/i
        })
        every.push(worker)
        live.add(worker)
        void worker.exited.then(({ code, signal }) => {
          live.delete(worker)
          if (!supervising) return
          exits.push({ pid: worker.pid, code, signal, at: Date.now() })
          // A crash loop would not end: the bound fails the test instead of restarting for ever.
          if (exits.length <= 4 * MAX_ATTEMPTS) spawnOne()
        })
        return worker
      }
      let feeding = true
      let feeder: Promise<void> = Promise.resolve()
      try {
        // Migrates the database before any worker starts.
        await runtime.runPromise(QueueRepo.QueueRepo)
        for (let i = 0; i < WORKERS; i++) spawnOne()
        await Promise.all([...live].map((w) => w.ready(60_000)))

        // Ordinary items all along: one every 40 ms (50-150 ms of work each), so
        // every crash has some in flight or prefetched in the process it takes down.
        const ordinary: Array<number> = []
        feeder = (async () => {
          let n = 0
          while (feeding) {
            n++
            ordinary.push((await enqueue("rel.ok", { n, ms: 50 + Math.floor(Math.random() * 100) })).id)
            await delay(40)
          }
        })()
        await waitFor("ordinary items running", async () => readRuns(logs.dir).length >= 20, 30_000)

        // One poison after the other: a process that had claimed both would
        // spend an attempt of the one it never started, and the crashes could
        // not be told apart.
        const poisons: Record<"exit" | "oom", number> = { exit: 0, oom: 0 }
        const enqueuedAt = new Map<number, number>()
        const deadAt = new Map<number, number>()
        for (const mode of ["exit", "oom"] as const) {
          const at = Date.now()
          const id = (await enqueue("rel.poison", { n: 0, mode }, { maxAttempts: MAX_ATTEMPTS })).id
          poisons[mode] = id
          enqueuedAt.set(id, at)
          await waitFor(`the ${mode} poison item dead`, async () => {
            const { rows } = await pool.query<{ n: string }>(
              "SELECT count(*) AS n FROM docket_items WHERE id = $1 AND state = 'dead'",
              [id]
            )
            return Number(rows[0].n) === 1
          }, 60_000, 50)
          deadAt.set(id, Date.now())
        }
        // Ordinary items go on a while after the poisons died: no crash any more.
        const quietFrom = Date.now()
        // An out-of-memory run may outlast its lease (the process is blocked while
        // it allocates): the item can be dead before that last process is gone.
        const poisonPids = () => new Set(readRuns(logs.dir).filter((r) => r.kind === "rel.poison").map((r) => r.pid))
        await waitFor("every process that ran a poison item gone", () =>
          [...poisonPids()].every((pid) => exits.some((e) => e.pid === pid)), 30_000)
        await waitFor("ordinary items run after both poisons died", () =>
          readRuns(logs.dir).filter((r) => r.kind === "rel.ok" && r.start > quietFrom && r.end !== null).length >= 30, 30_000)
        feeding = false
        await feeder
        await waitFor("every ordinary item done", async () => {
          const { rows } = await pool.query<{ n: string }>(
            "SELECT count(*) AS n FROM docket_items_all WHERE kind = 'rel.ok' AND state = 'done'"
          )
          return Number(rows[0].n) === ordinary.length
        }, 60_000)

        // The workers up now (the first ones and the replacements) stop gracefully.
        supervising = false
        const survivors = [...live]
        // A replacement may still be starting (SIGTERM before its handler is in kills it by the signal).
        await Promise.all(survivors.map((w) => w.ready(60_000)))
        const stops = await Promise.all(survivors.map((w) => stopWorker(w)))

        const runs = readRuns(logs.dir)
        const { rows } = await pool.query<PoisonRow>(
          "SELECT id, state, attempts, last_error FROM docket_items WHERE kind = 'rel.poison' ORDER BY id"
        )
        const { rows: states } = await pool.query<{ state: string; n: string }>(
          "SELECT state, count(*) AS n FROM docket_items_all WHERE kind = 'rel.ok' GROUP BY state"
        )
        const okRuns = runs.filter((r) => r.kind === "rel.ok")
        const okItemsRunTwice = new Set(
          okRuns.filter((r) => okRuns.some((o) => o.item === r.item && o.attempt < r.attempt)).map((r) => r.item)
        )
        const figures: Record<string, number | string | boolean> = {}
        const checks: Array<() => void> = []
        for (const [mode, id] of Object.entries(poisons)) {
          const item = rows.find((r) => Number(r.id) === id)!
          const poisonRuns = runs.filter((r) => r.item === id)
          // A crash it caused: a process that started a run of it and then exited.
          const crashed = exits.filter((e) => poisonRuns.some((r) => r.pid === e.pid))
          figures[`${mode}Runs`] = poisonRuns.length
          figures[`${mode}Crashes`] = crashed.length
          figures[`${mode}Exits`] = [...new Set(crashed.map((e) => e.signal ?? `code ${e.code}`))].join("/")
          // From the run's start to its process's exit (seen by the test).
          figures[`${mode}MaxCrashMs`] = Math.max(...crashed.map((e) => e.at - poisonRuns.find((r) => r.pid === e.pid)!.start))
          figures[`${mode}TimeToDeadMs`] = deadAt.get(id)! - enqueuedAt.get(id)!
          checks.push(() => {
            expect(item.state, `${mode} poison state`).toBe("dead")
            expect(item.last_error ?? "", `${mode} poison error`).toMatch(
              new RegExp(`^LeaseExpired: attempt ${MAX_ATTEMPTS + 1} of ${MAX_ATTEMPTS}; earlier runs lost their lease`)
            )
            expect(poisonRuns.map((r) => r.attempt).sort(), `${mode} poison attempts run`).toEqual([1, 2, 3])
            // Every run was in a process of its own, and took it down.
            expect(new Set(poisonRuns.map((r) => r.pid)).size).toBe(MAX_ATTEMPTS)
            expect(crashed).toHaveLength(MAX_ATTEMPTS)
            for (const e of crashed) {
              if (mode === "exit") expect(e).toMatchObject({ code: 1, signal: null })
              else expect(e.signal === "SIGABRT" || e.code === 134, `OOM exit ${e.code ?? e.signal}`).toBe(true)
            }
          })
        }
        // No run of a poison item once it was dead; no process exited but those that ran one.
        const poisonRunsAfterDead = runs.filter((r) => r.kind === "rel.poison" && r.start >= deadAt.get(r.item)!).length
        const otherCrashes = exits.filter((e) => !poisonPids().has(e.pid)).length
        const lost = ordinary.length - Number(states.find((s) => s.state === "done")?.n ?? 0)
        report("poison item", {
          maxAttempts: MAX_ATTEMPTS,
          leaseMs: LEASE_MS,
          ...figures,
          crashes: exits.length,
          poisonRunsAfterDead,
          otherCrashes,
          workersStarted: every.length,
          ordinaryItems: ordinary.length,
          ordinaryRunTwice: okItemsRunTwice.size,
          lost
        })
        for (const check of checks) check()
        // Every crash was one of the poisons' runs; none after both were dead.
        expect(exits).toHaveLength(2 * MAX_ATTEMPTS)
        expect(poisonRunsAfterDead).toBe(0)
        expect(otherCrashes).toBe(0)
        expect(states.map((s) => s.state)).toEqual(["done"])
        expect(lost).toBe(0)
        expect(survivors).toHaveLength(WORKERS)
        for (const stop of stops) expect(stop).toEqual({ code: 0, signal: null })
      } finally {
        supervising = false
        feeding = false
        await feeder.catch(() => undefined)
        await Promise.all(every.map((w) => killWorker(w)))
        await runtime.dispose().catch(() => undefined)
        await pool.end().catch(() => undefined)
        await db.drop().catch(() => undefined)
        logs.remove()
      }
    }, 120_000)
  })
