/**
 * A handler that blocks the event loop for longer than its lease (PostgreSQL):
 * two `docket worker` processes (lease 2 s); an item whose first attempt runs
 * a synchronous busy loop for 5 s. The worker that takes it is frozen: it
 * renews nothing, its lease runs out, and the other worker claims the item
 * and runs it (attempt 2, no block). When the first worker's loop ends, its
 * late outcome is refused (the claim token is stale), and its stall watch
 * says what happened and what to do.
 *
 * Checked: the item ran twice (once per worker) and was completed once, by the
 * second worker; the first worker's outcome was refused (or its run dropped as
 * lost: either way it recorded nothing); the first worker's log has the stall
 * warning, naming the block, the lease and the fixes; both stop with exit 0.
 */
import { Effect, ManagedRuntime, Option } from "effect"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as QueueRepo from "../../src/QueueRepo.js"
import { freshPgDatabase, pgAvailable, repoLayer } from "../support/db.js"
import { fixture, killWorker, report, startWorker, stopWorker, waitFor, type WorkerProcess } from "./support.js"

const LEASE_MS = 2000
const BLOCK_MS = 5000

/** Every start and end of a run, from the task's logs (one file per process). */
const readRuns = (dir: string) =>
  readdirSync(dir).flatMap((name) => {
    const pid = Number(/^exec-(\d+)\.log$/.exec(name)![1])
    return readFileSync(join(dir, name), "utf8").split("\n").filter((l) => l !== "").map((line) => {
      const [id, job, attempt, at, what] = line.split(" ")
      return { pid, id: Number(id), job: Number(job), attempt: Number(attempt), at: Number(at), what }
    })
  })

export const blockingHandlerScenario = () =>
  describe.skipIf(!pgAvailable)("a handler that blocks the event loop longer than its lease (PostgreSQL)", () => {
    it("another worker runs the item, the late outcome is refused, the item is completed once, the log says why", async () => {
      const db = await freshPgDatabase()
      const logs = mkdtempSync(join(tmpdir(), "docket-rel-block-"))
      const runtime = ManagedRuntime.make(repoLayer(db.url))
      const repo = <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) =>
        runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, f))
      const workers: Array<WorkerProcess> = []
      try {
        await repo((r) => r.stats) // migrated
        for (let i = 0; i < 2; i++) {
          workers.push(startWorker({
            database: db.url,
            tasks: fixture("block"),
            args: ["--lease", `${LEASE_MS}ms`, "--poll", "200ms"],
            env: { RELIABILITY_LOG_DIR: logs },
            keep: /rel\.block|refused|lease lost|blocked/
          }))
        }
        await Promise.all(workers.map((w) => w.ready(60_000)))
        const item = await repo((r) => r.enqueue("rel.block", { job: 1, blockMs: BLOCK_MS }))
        const enqueuedAt = Date.now()
        const startedLine = (attempt: number) => new RegExp(` started rel\\.block #${item.id} \\(attempt ${attempt}\\)`)
        const done = new RegExp(` done rel\\.block #${item.id} `)

        // The second attempt runs, in the worker that did not block; it completes the item.
        await waitFor("attempt 2 done", () => workers.some((w) => w.kept.some((l) => done.test(l))), 30_000, 50)
        // (Its task log: the blocked worker prints its "started" line only after the block.)
        const blockedPid = readRuns(logs).find((r) => r.attempt === 1)?.pid
        const first = workers.find((w) => w.pid === blockedPid)!
        const second = workers.find((w) => w !== first)!
        expect(first, "a worker ran attempt 1").toBeDefined()
        expect(second.kept.some((l) => startedLine(2).test(l)), "the other worker ran attempt 2").toBe(true)
        // The first worker wakes, its outcome is refused, and it says why.
        await waitFor("the first worker's stall warning", () => first.kept.some((l) => /event loop was blocked/.test(l)), 20_000, 50)
        await waitFor(
          "the first worker's late outcome refused or its run dropped",
          () => first.kept.some((l) => /completion refused|lease lost rel\.block/.test(l)),
          20_000,
          50
        )
        const warning = first.kept.find((l) => /event loop was blocked/.test(l))!
        const refusedLine = first.kept.find((l) => /completion refused|lease lost rel\.block/.test(l))!
        await waitFor("the first run's end written", () => readRuns(logs).some((r) => r.attempt === 1 && r.what === "end"), 20_000, 50)
        const all = readRuns(logs)
        const firstRun = all.filter((r) => r.attempt === 1)
        const secondRun = all.filter((r) => r.attempt === 2)
        const row = Option.getOrThrow(await repo((r) => r.get(item.id)))
        const doneLines = workers.flatMap((w) => w.kept.filter((l) => done.test(l)))
        const exits = await Promise.all(workers.map((w) => stopWorker(w)))
        const blockedS = Number(/blocked for ([\d.]+) s/.exec(warning)?.[1])

        report("blocking handler", {
          leaseMs: LEASE_MS,
          blockMs: BLOCK_MS,
          runs: new Set(all.map((r) => `${r.pid}:${r.attempt}`)).size,
          secondStartAfterFirstMs: secondRun[0].at - firstRun[0].at,
          completions: doneLines.length,
          firstOutcome: /completion refused/.test(refusedLine) ? "refused" : "lease lost",
          stallReportedS: blockedS,
          attempts: row.attempts,
          enqueueToDoneMs: row.finishedAt === null ? -1 : row.finishedAt - enqueuedAt
        })
        console.log(`RELIABILITY: blocking handler: the first worker said:\n${first.kept.filter((l) => !/ started /.test(l)).join("\n")}`)

        expect(firstRun.map((r) => [r.pid, r.what])).toEqual([[first.pid, "start"], [first.pid, "end"]])
        expect(secondRun.map((r) => r.pid)).toEqual([second.pid, second.pid])
        // The second run started while the first was still blocked, once the lease ran out
        // (the lease began at the claim, a little before the first run's start line).
        expect(secondRun[0].at).toBeGreaterThanOrEqual(firstRun[0].at + LEASE_MS - 500)
        expect(secondRun[0].at).toBeLessThan(firstRun[1].at)
        // Completed once, by the second worker; the first recorded nothing.
        expect(doneLines).toHaveLength(1)
        expect(second.kept.some((l) => done.test(l))).toBe(true)
        expect(row).toMatchObject({ state: "done", attempts: 2 })
        // The log says plainly what happened and how to fix it.
        expect(warning).toMatch(/the event loop was blocked for [\d.]+ s \(longer than the lease, 2\.0 s\)/)
        expect(warning).toMatch(/may run again elsewhere/)
        expect(warning).toMatch(/worker thread/)
        expect(warning).toMatch(/raise the lease/)
        expect(blockedS).toBeGreaterThanOrEqual(LEASE_MS / 1000)
        expect(exits).toEqual([{ code: 0, signal: null }, { code: 0, signal: null }])
      } finally {
        await Promise.all(workers.map((w) => killWorker(w)))
        await runtime.dispose()
        await db.drop()
        rmSync(logs, { recursive: true, force: true })
      }
    }, 90_000)
  })
