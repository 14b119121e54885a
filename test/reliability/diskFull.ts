/**
 * SQLite disk full: the file lives on a small tmpfs this test mounts (we run
 * as root; where mounting is not allowed the scenario is skipped and says
 * why). A filler file leaves a few MB free. Two `docket worker` processes
 * run items while this process enqueues batches until the disk is full; the
 * disk is then kept full for a while (enqueues keep being tried, the workers
 * keep failing their claims, outcome writes and renewals), then the filler
 * is deleted.
 *
 * Checked: every refused enqueue is a typed `StorageError` (SQLITE_FULL) from
 * the library, keyed batches too (one transaction: its COMMIT fails, which
 * @effect/sql makes a defect; src/internal/transaction.ts types it), and wrote nothing (`docket enqueue` exits 1 saying so); nothing accepted is lost; the workers stay
 * up, retry at their pace (CPU measured) and log each failing operation at
 * most once per period (STORAGE_LOG_PERIOD_MS) plus once when it works again,
 * far fewer lines than failures; once space is freed every accepted item is
 * done; `PRAGMA integrity_check` is ok.
 */
import Sqlite from "better-sqlite3"
import { Effect, Either, ManagedRuntime } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { StorageError } from "../../src/Errors.js"
import { STORAGE_LOG_PERIOD_MS } from "../../src/internal/worker/events.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { docket } from "../support/cli.js"
import { repoLayer } from "../support/db.js"
import { delay, fixture, killWorker, report, startWorker, stopWorker, waitFor, type WorkerProcess } from "./support.js"

/** The tmpfs's size, and the free space the filler leaves once the database is made. */
const FS_BYTES = 24 * 1024 * 1024
const FREE_BYTES = 4 * 1024 * 1024
/** How long the disk is kept full once the first enqueue is refused. */
const FULL_MS = 12_000

/** Mounts a tmpfs of `bytes` on a fresh folder: its path, or why it cannot. */
const mountTmpfs = (bytes: number): { readonly dir: string } | { readonly reason: string } => {
  if (process.platform !== "linux") return { reason: `not Linux (${process.platform}): no tmpfs` }
  if (process.getuid?.() !== 0) return { reason: "not root: mount -t tmpfs is not allowed" }
  const dir = mkdtempSync(join(tmpdir(), "docket-rel-full-"))
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { stdio: "pipe" })
    return { dir }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim()
    return { reason: `mount -t tmpfs failed: ${stderr || String(error)}` }
  }
}

const unmount = (dir: string) => {
  try {
    execFileSync("umount", [dir], { stdio: "pipe" })
  } catch {
    execFileSync("umount", ["-l", dir], { stdio: "pipe" })
  }
  rmSync(dir, { recursive: true, force: true })
}

/** Items by state, and the integrity check (a connection of its own). */
const inspect = (file: string) => {
  const db = new Sqlite(file, { readonly: true })
  try {
    db.pragma("busy_timeout = 10000")
    const integrity = (db.pragma("integrity_check") as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join("; ")
    const rows = db.prepare("SELECT id, state FROM docket_items").all() as Array<{ id: number; state: string }>
    return { integrity, states: new Map(rows.map((r) => [r.id, r.state])) }
  } finally {
    db.close()
  }
}

/** Jobs run, from the task's logs (one file per process): job -> runs. */
const runsByJob = (dir: string) => {
  const runs = new Map<number, number>()
  for (const name of readdirSync(dir)) {
    for (const line of readFileSync(join(dir, name), "utf8").split("\n")) {
      const job = Number(line.split(" ")[1])
      if (line !== "" && Number.isFinite(job)) runs.set(job, (runs.get(job) ?? 0) + 1)
    }
  }
  return runs
}

/** CPU time (user + system) of a process, in ms (from /proc; 100 ticks a second). */
const cpuMs = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 10
}

/** A worker's storage-error lines: each operation's warnings (stderr), the failures they stand for, and its event lines (stdout). */
const storageLines = (worker: WorkerProcess) => {
  const failed = new Map<string, number>()
  const worked = new Map<string, number>()
  const logged = new Map<string, number>()
  let eventLines = 0
  for (const line of worker.kept) {
    const warning = /^stderr: warn(?:ing)?: docket: (.+?) failed(?: \((\d+) more failures not logged)?/.exec(line)
    if (warning !== null) {
      failed.set(warning[1], (failed.get(warning[1]) ?? 0) + 1)
      logged.set(warning[1], (logged.get(warning[1]) ?? 0) + 1 + Number(warning[2] ?? 0))
    }
    const again = /^stderr: warn(?:ing)?: docket: (.+?) works again, after (\d+) failures/.exec(line)
    if (again !== null) worked.set(again[1], Number(again[2]))
    if (/ storage error in /.test(line) && !line.startsWith("stderr:")) eventLines++
  }
  // The failures: an operation's "works again" line has its full count (the warnings miss the last unlogged ones).
  let failures = 0
  for (const [operation, n] of logged) failures += worked.get(operation) ?? n
  return { failed, worked, failures, eventLines }
}

const mounted: Array<string> = []

export const diskFullScenario = () =>
  describe("SQLite disk full (a small tmpfs)", () => {
    afterAll(() => {
      for (const dir of mounted.splice(0)) unmount(dir)
    })

    it("enqueues fail typed, workers log once per period, and once space is freed everything accepted runs", async (ctx) => {
      const mount = mountTmpfs(FS_BYTES)
      if ("reason" in mount) {
        console.warn(`RELIABILITY: disk full scenario skipped: ${mount.reason}`)
        return ctx.skip(mount.reason)
      }
      mounted.push(mount.dir)
      const file = join(mount.dir, "queue.db")
      const filler = join(mount.dir, "filler")
      const logs = mkdtempSync(join(tmpdir(), "docket-rel-full-logs-"))
      const runtime = ManagedRuntime.make(repoLayer(file))
      const workers: Array<WorkerProcess> = []
      const started = performance.now()
      try {
        const repo = await runtime.runPromise(QueueRepo.QueueRepo)
        // The database exists (migrated); the filler leaves FREE_BYTES.
        const free = () => {
          const s = statfsSync(mount.dir)
          return s.bavail * s.bsize
        }
        writeFileSync(filler, Buffer.alloc(Math.max(0, free() - FREE_BYTES)))
        const freeAtStart = free()

        for (let i = 0; i < 2; i++) {
          workers.push(startWorker({
            database: file,
            tasks: fixture("sqlite"),
            args: ["--lease", "3s", "--poll", "200ms", "--concurrency", "10"],
            env: { RELIABILITY_LOG_DIR: logs },
            keep: /failed|works again|storage error|lease lost|refused|blocked/
          }))
        }
        await Promise.all(workers.map((w) => w.ready(60_000)))

        // Enqueue until the disk is full (batches of 100), then keep trying while it stays full.
        const accepted = new Map<number, number>()
        const refusals: Array<{ keyed: boolean; tag: string; message: string; ms: number }> = []
        let acceptedWhileFull = 0
        let next = 1
        // Every other batch keyed: a keyed batch is one transaction (its COMMIT is what fails).
        let batches = 0
        const enqueue = async () => {
          const keyed = batches++ % 2 === 1
          const batch = Array.from({ length: 100 }, (_, i) => ({
            kind: "rel.append",
            payload: { job: next + i, ms: 1 + Math.floor(Math.random() * 4) },
            key: keyed ? `job-${next + i}` : undefined
          }))
          next += batch.length
          const at = performance.now()
          // A defect (not a typed failure) rejects: counted as untyped.
          const result = await runtime.runPromise(Effect.either(repo.enqueueMany(batch))).catch((defect: unknown) =>
            Either.left(defect as StorageError)
          )
          if (Either.isRight(result)) {
            result.right.forEach((r, i) => accepted.set(batch[i].payload.job, r.id))
            return true
          }
          const error = result.left
          refusals.push({
            keyed,
            tag: error instanceof StorageError ? error._tag : `untyped ${String((error as { _tag?: string })._tag)}`,
            message: error.message,
            ms: performance.now() - at
          })
          return false
        }
        const fillDeadline = performance.now() + 60_000
        while (await enqueue()) {
          if (performance.now() > fillDeadline) throw new Error(`the disk did not fill within 60 s (${accepted.size} accepted)`)
          await delay(10)
        }
        const fullAt = performance.now()
        const acceptedBeforeFull = accepted.size
        // The command too: exit 1 and one line saying why (job 0: were it stored, it would run, and be caught below).
        const command = await docket(["enqueue", "--database", file, "rel.append", JSON.stringify({ job: 0, ms: 1 })])
        const cpuBefore = workers.map((w) => cpuMs(w.pid))
        while (performance.now() - fullAt < FULL_MS) {
          await delay(200)
          if (await enqueue()) acceptedWhileFull += 100
        }
        const fullMs = performance.now() - fullAt
        const cpuFull = workers.map((w, i) => Math.round((100 * (cpuMs(w.pid) - cpuBefore[i])) / fullMs))
        const leftWhileFull = [...inspect(file).states.values()].filter((s) => s !== "done").length

        // Space freed: everything accepted runs.
        rmSync(filler)
        const freedAt = performance.now()
        await waitFor("every accepted item done after the space was freed", () => {
          const { states } = inspect(file)
          return [...accepted.values()].every((id) => states.get(id) === "done")
        }, 60_000, 200).catch((error: unknown) => {
          // What was left, and what the workers said last.
          const db = new Sqlite(file, { readonly: true })
          const left = db.prepare(
            "SELECT state, claimed_by, count(*) AS n, min(lease_until) AS lease FROM docket_items WHERE state <> 'done' GROUP BY 1, 2"
          ).all()
          db.close()
          console.log(`RELIABILITY: sqlite disk full: not drained, at ${Date.now()}: ${JSON.stringify(left)}`)
          for (const w of workers) console.log(`worker ${w.pid} (alive ${w.alive()}):\n${w.tail()}`)
          throw error
        })
        const drainedMs = performance.now() - freedAt
        // A few accepted at once again.
        expect(await enqueue()).toBe(true)
        await waitFor("the last batch done", () => {
          const { states } = inspect(file)
          return [...states.values()].every((s) => s === "done")
        }, 30_000, 200)
        const exits = await Promise.all(workers.map((w) => stopWorker(w)))
        const { integrity, states } = inspect(file)
        const runs = runsByJob(logs)
        const lost = [...accepted].filter(([job, id]) => states.get(id) !== "done" || !runs.has(job)).map(([job]) => job)
        // A refused batch wrote nothing: none of its rows, no run of its jobs.
        const refusedStored = [...runs.keys()].filter((job) => !accepted.has(job)).length
        const duplicates = [...runs.values()].reduce((n, r) => n + r - 1, 0)
        // A job ran again only after a worker reported losing its item: its renewal found
        // the item taken ("lease lost") or its outcome was refused (the lease ran out
        // while the outcome waited for the disk, and another worker claimed the item first).
        const reported = new Set(workers.flatMap((w) => w.kept.flatMap((line) => {
          const m = /lease lost rel\.append #(\d+)|refused.*\bid=(\d+)/.exec(line)
          return m === null ? [] : [Number(m[1] ?? m[2])]
        })))
        const unexplained = [...runs].filter(([job, n]) => n > 1 && !reported.has(accepted.get(job) ?? -1)).map(([job]) => job)
        const lines = workers.map(storageLines)
        const periods = Math.ceil(fullMs / STORAGE_LOG_PERIOD_MS)
        const operations = [...new Set(lines.flatMap((l) => [...l.failed.keys()]))]
        const maxLinesPerOperation = Math.max(...lines.flatMap((l) => [...l.failed.values()]))
        const warningLines = lines.reduce((n, l) => n + [...l.failed.values()].reduce((a, b) => a + b, 0), 0)
        const failures = lines.reduce((n, l) => n + l.failures, 0)

        report("sqlite disk full", {
          fsMb: FS_BYTES / 1024 / 1024,
          freeAtStartMb: Math.round(freeAtStart / 1024 / 1024 * 10) / 10,
          acceptedBeforeFull,
          acceptedWhileFull,
          accepted: accepted.size,
          refusedEnqueues: refusals.length,
          refusedKeyed: refusals.filter((r) => r.keyed).length,
          refusedUntyped: refusals.filter((r) => r.tag !== "StorageError").length,
          maxRefusalMs: Math.round(Math.max(...refusals.map((r) => r.ms))),
          refusedStored,
          commandExit: command.code ?? String(command.signal),
          fullS: Math.round(fullMs / 100) / 10,
          leftWhileFull,
          workerCpuWhileFullPct: cpuFull.join("/"),
          operationsFailing: operations.join(","),
          failures,
          warningLines,
          maxLinesPerOperation,
          eventLines: lines.map((l) => l.eventLines).join("/"),
          worksAgainLines: lines.reduce((n, l) => n + l.worked.size, 0),
          drainedAfterFreeMs: Math.round(drainedMs),
          duplicates,
          duplicatesUnexplained: unexplained.length,
          integrity,
          lost: lost.length,
          seconds: Math.round((performance.now() - started) / 100) / 10
        })
        if (refusals.length > 0) console.log(`RELIABILITY: sqlite disk full: a refusal: ${refusals[0].message}`)
        console.log(`RELIABILITY: sqlite disk full: docket enqueue exited ${command.code}: ${command.stderr.trim()}`)
        console.log(`RELIABILITY: sqlite disk full: the first worker's storage lines:\n${workers[0].kept.filter((l) => l.startsWith("stderr:")).join("\n")}`)

        expect(refusals.length).toBeGreaterThan(0)
        expect(refusals.some((r) => r.keyed) && refusals.some((r) => !r.keyed)).toBe(true)
        for (const r of refusals) {
          expect(r.tag).toBe("StorageError")
          expect(r.message).toMatch(/disk is full/)
        }
        expect(command.code).toBe(1)
        expect(command.stderr).toMatch(/disk is full/)
        expect(refusedStored).toBe(0)
        expect(lost).toEqual([])
        expect(unexplained).toEqual([])
        expect(integrity).toBe("ok")
        expect(exits).toEqual([{ code: 0, signal: null }, { code: 0, signal: null }])
        // The workers failed (claims, outcome writes, renewals) and said so...
        expect(failures).toBeGreaterThan(0)
        // ...at most once per operation and period (+1: the first line of an episode), and once when it worked again.
        for (const l of lines) {
          for (const [operation, n] of l.failed) expect(n, `${operation} warning lines`).toBeLessThanOrEqual(periods + 1)
          // The command's event lines (stdout) are limited the same way.
          expect(l.eventLines).toBeLessThanOrEqual(l.failed.size * (periods + 1))
          // Claims and outcome writes say when they work again (renewals too, but only
          // if a renewal finds an item held, which the short runs may not leave).
          for (const operation of ["claim", "record outcome"]) {
            if (l.failed.has(operation)) expect(l.worked.has(operation), `${operation} works again`).toBe(true)
          }
        }
        // Far fewer lines than failures.
        expect(warningLines * 4).toBeLessThan(failures)
      } finally {
        await Promise.all(workers.map((w) => killWorker(w)))
        await runtime.dispose()
        rmSync(logs, { recursive: true, force: true })
      }
    }, 120_000)
  })
