/**
 * SQLite: two `docket worker` processes drain one file while this process
 * enqueues more; round after round a worker is SIGKILLed in the middle of its
 * work (after a random number of items done, so claims, runs and batched
 * outcome writes are in flight) and replaced. The task appends each execution
 * to a log file before it works.
 *
 * In the middle round the test holds SQLite's write lock for 3 s, longer than the
 * 2 s lease: workers waiting for it are frozen (better-sqlite3 is synchronous),
 * leases run out, and items run again; each such repeated run must be one its
 * earlier worker reported (lease lost, outcome refused).
 *
 * After the rounds every worker is SIGKILLed; then the file passes
 * `PRAGMA integrity_check`, and every accepted job is either done (run, and
 * gone from the table) or still queued. A last worker drains the rest.
 */
import Sqlite from "better-sqlite3"
import { Effect, Either, ManagedRuntime } from "effect"
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as QueueRepo from "../../src/QueueRepo.js"
import { freshDir, repoLayer } from "../support/db.js"
import {
  delay,
  fixture,
  killWorker,
  report,
  scaled,
  startWorker,
  stopWorker,
  waitFor,
  type WorkerProcess
} from "./support.js"

/** Item ids that have run, and every run of each job (pid, item, time), from the task's logs. */
const readLogs = (dir: string) => {
  const items = new Set<number>()
  const jobs = new Map<number, Array<{ pid: number; item: number; at: number }>>()
  for (const name of readdirSync(dir).filter((n) => n.startsWith("exec-"))) {
    const pid = Number(/^exec-(\d+)\.log$/.exec(name)![1])
    for (const line of readFileSync(join(dir, name), "utf8").split("\n")) {
      const [item, job, , at] = line.split(" ").map(Number)
      if (!Number.isFinite(item) || !Number.isFinite(job)) continue
      items.add(item)
      const runs = jobs.get(job) ?? []
      runs.push({ pid, item, at })
      jobs.set(job, runs)
    }
  }
  for (const runs of jobs.values()) runs.sort((a, b) => a.at - b.at)
  return { items, jobs }
}

const integrity = (file: string) => {
  const db = new Sqlite(file)
  try {
    db.pragma("busy_timeout = 10000")
    const rows = db.pragma("integrity_check") as Array<{ integrity_check: string }>
    const ids = new Set((db.prepare("SELECT id FROM docket_items WHERE state <> 'done'").all() as Array<{ id: number }>).map((r) => r.id))
    return { result: rows.map((r) => r.integrity_check).join("; "), ids }
  } finally {
    db.close()
  }
}

/** Holds the write lock of the file for `ms` (this process waits, as a long writer would). */
const holdWriteLock = (file: string, ms: number) => {
  const db = new Sqlite(file)
  try {
    db.pragma("busy_timeout = 10000")
    db.exec("BEGIN IMMEDIATE")
    const end = Date.now() + ms
    while (Date.now() < end) {
      // holding the lock
    }
    db.exec("COMMIT")
  } finally {
    db.close()
  }
}

export const sqliteKillScenario = () =>
  describe("SQLite: SIGKILL a worker in the middle of its work, repeatedly", () => {
    it("keeps the file intact; every accepted job is done or still queued", async () => {
      const initial = scaled(3000, 100)
      const rounds = 10
      const perRound = scaled(300, 10)
      const lockHoldMs = 3000
      const scratch = freshDir()
      const file = join(scratch.dir, "queue.db")
      const logs = join(scratch.dir, "logs")
      mkdirSync(logs)
      const runtime = ManagedRuntime.make(repoLayer(file))
      const everyWorker: Array<WorkerProcess> = []
      const started = performance.now()
      try {
        // Accepted: the enqueue returned its ids (job number -> item id).
        const accepted = new Map<number, number>()
        let refused = 0
        let next = 1
        const enqueue = async (n: number) => {
          const batch = Array.from({ length: n }, (_, i) => ({
            kind: "rel.append",
            payload: { job: next + i, ms: 1 + Math.floor(Math.random() * 20) }
          }))
          next += n
          const result = await runtime.runPromise(
            Effect.either(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueueMany(batch)))
          )
          if (Either.isLeft(result)) {
            refused += n
            return
          }
          result.right.forEach((r, i) => accepted.set(batch[i].payload.job, r.id))
        }
        for (let done = 0; done < initial; done += 1000) await enqueue(Math.min(1000, initial - done))
        const queueSize = () =>
          runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.stats)).then((s) => s.due + s.scheduled + s.running)

        const live = new Set<WorkerProcess>()
        const spawnOne = () => {
          const worker = startWorker({
            database: file,
            tasks: fixture("sqlite"),
            args: ["--lease", "2s", "--poll", "200ms", "--concurrency", "10"],
            env: { RELIABILITY_LOG_DIR: logs },
            count: /^\S+ done rel\.append /,
            keep: /lease lost|refused|storage error/
          })
          everyWorker.push(worker)
          live.add(worker)
          void worker.exited.then(() => live.delete(worker))
          return worker
        }
        spawnOne()
        spawnOne()
        let kills = 0
        const killedAt = new Map<number, number>()
        for (let round = 0; round < rounds; round++) {
          await Promise.all([...live].map((w) => w.ready(60_000)))
          const candidates = [...live]
          const victim = candidates[Math.floor(Math.random() * candidates.length)]
          // Killed in the middle of its work: after a random number of items done here.
          const target = victim.counted() + 5 + Math.floor(Math.random() * 60)
          // Work for it: the queue is topped up whenever it runs low.
          const deadline = performance.now() + 60_000
          while (victim.counted() < target && victim.alive()) {
            if (performance.now() > deadline) {
              throw new Error(`worker ${victim.pid} did not reach ${target} items in 60 s\n${victim.tail()}`)
            }
            if (await queueSize() < 300) await enqueue(perRound)
            await delay(5)
          }
          if (round === Math.floor(rounds / 2)) {
            // One round, a writer holds SQLite's write lock for longer than the lease (as a
            // slow disk or a long transaction would): the workers wait for it, frozen. Then
            // they work on (20 more items) before the kill.
            holdWriteLock(file, lockHoldMs)
            const more = victim.counted() + 20
            await waitFor(`worker ${victim.pid} works after the lock`, async () => {
              if (await queueSize() < 300) await enqueue(perRound)
              return victim.counted() >= more || !victim.alive()
            }, 60_000, 20)
          }
          killedAt.set(victim.pid, Date.now())
          await killWorker(victim)
          kills++
          spawnOne()
        }
        // The last ones die too: the file is left as a crash leaves it.
        for (const w of [...live]) {
          killedAt.set(w.pid, Date.now())
          await killWorker(w)
          kills++
        }

        const afterKills = integrity(file)
        const ran = readLogs(logs)
        let queued = 0
        let done = 0
        const lost: Array<number> = []
        for (const [job, id] of accepted) {
          if (afterKills.ids.has(id)) queued++
          else if (ran.items.has(id)) done++
          else lost.push(job)
        }

        // A last worker drains the rest.
        const last = spawnOne()
        await last.ready(60_000)
        await waitFor("the last worker drains the queue", () => integrity(file).ids.size === 0, 120_000, 200)
        expect(await stopWorker(last)).toEqual({ code: 0, signal: null })
        const final = integrity(file)
        const ranFinally = readLogs(logs)
        const neverRan = [...accepted.keys()].filter((job) => !ranFinally.jobs.has(job))
        const duplicates = [...ranFinally.jobs.values()].reduce((n, runs) => n + runs.length - 1, 0)
        // A job ran again only after the worker of its earlier run was killed, or after
        // that worker lost the item's lease and said so: its renewal found the item
        // taken ("lease lost") or its outcome was refused. (A worker waiting for SQLite's
        // write lock is frozen, renewals included: a slow disk can outlast a 2 s lease.)
        const reportedLost = new Map(everyWorker.map((w) => [w.pid, new Set(w.kept.flatMap((line) => {
          const m = /lease lost rel\.append #(\d+)|(?:lease lost|refused).*\bid=(\d+)/.exec(line)
          return m === null ? [] : [Number(m[1] ?? m[2])]
        }))]))
        let afterKill = 0
        let afterLostLease = 0
        const unexplained: Array<string> = []
        for (const [job, runs] of ranFinally.jobs) {
          for (let i = 0; i < runs.length - 1; i++) {
            const at = killedAt.get(runs[i].pid)
            if (at !== undefined && runs[i + 1].at > at) {
              afterKill++
            } else if (reportedLost.get(runs[i].pid)?.has(runs[i].item)) {
              afterLostLease++
            } else {
              unexplained.push(
                `job ${job}: run by ${runs[i].pid} at ${runs[i].at} (killed at ${at}), again by ${runs[i + 1].pid} at ${runs[i + 1].at}`
              )
            }
          }
        }

        report("sqlite kill", {
          jobs: accepted.size,
          refusedEnqueues: refused,
          kills,
          doneAtLastKill: done,
          queuedAtLastKill: queued,
          duplicates,
          duplicatesAfterKill: afterKill,
          duplicatesAfterLostLease: afterLostLease,
          writeLockHeldMs: lockHoldMs,
          integrity: afterKills.result,
          lost: lost.length + neverRan.length,
          seconds: Math.round((performance.now() - started) / 100) / 10
        })
        expect(afterKills.result).toBe("ok")
        expect(final.result).toBe("ok")
        expect(lost).toEqual([])
        expect(neverRan).toEqual([])
        if (unexplained.length > 0) {
          const notes = everyWorker.map((w) => `worker ${w.pid} (killed at ${killedAt.get(w.pid)}):\n${w.kept.join("\n")}`)
          console.log(`RELIABILITY: sqlite kill: unexplained repeated runs; the workers' own reports:\n${notes.join("\n")}`)
        }
        expect(unexplained).toEqual([])
        expect(existsSync(file)).toBe(true)
      } finally {
        await Promise.all(everyWorker.map((w) => killWorker(w)))
        await runtime.dispose()
        scratch.remove()
      }
    }, 300_000)
  })
