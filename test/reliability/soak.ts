/**
 * Soak (PostgreSQL): 100,000 jobs (times RELIABILITY_SCALE), one attempt in
 * ten failing at random (retried after 20 ms), through two `docket worker`
 * processes with their default settings. Sampled at every tenth of the way:
 * each worker's resident set size and the connections open to the database.
 *
 * At the end: every job done exactly once (the workers' own counts add up),
 * about one attempt in ten retried, each worker's RSS within a bound of its
 * RSS after the first tenth (10,000 jobs at full scale), and no more
 * connections open than after the first tenth.
 */
import { describe, expect, it } from "vitest"
import { freshPgDatabase, pgAvailable } from "../support/db.js"
import { enqueueJobs } from "./kill.js"
import { fixture, killWorker, pgCount, pgPool, report, rssMb, scaled, startWorker, stopWorker, waitFor } from "./support.js"

/** RSS may grow by this factor plus this many MB past its value after the first tenth (heap growth, not a leak). */
const RSS_FACTOR = 1.5
const RSS_SLACK_MB = 40

export const soakScenario = () =>
  describe.skipIf(!pgAvailable)("soak: 100,000 jobs, 10% random failures, 2 processes (PostgreSQL)", () => {
    it("does every job once; memory and connections stay flat", async () => {
      const jobs = scaled(100_000, 1000)
      const tenth = Math.floor(jobs / 10)
      const db = await freshPgDatabase()
      const pool = pgPool(db.url)
      const started = performance.now()
      const workers = [] as Array<ReturnType<typeof startWorker>>
      try {
        await enqueueJobs(db.url, "rel.soak", jobs, () => 0)
        const enqueuedS = (performance.now() - started) / 1000
        for (let i = 0; i < 2; i++) {
          workers.push(startWorker({ database: db.url, tasks: fixture("soak"), keep: /^docket worker stop/ }))
        }
        await Promise.all(workers.map((w) => w.ready(60_000)))
        const drainStarted = performance.now()
        // Connections other than this test's own sampling connection.
        const connections = () =>
          pgCount(pool, "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name <> ''")

        const samples: Array<{ done: number; rss: Array<number>; connections: number }> = []
        let maxConnections = 0
        let nextSample = tenth
        await waitFor("the soak to drain", async () => {
          const left = await pgCount(pool, "SELECT count(*) AS n FROM docket_items WHERE state NOT IN ('dead', 'done')")
          const done = jobs - left
          const open = await connections()
          maxConnections = Math.max(maxConnections, open)
          if (done >= nextSample || left === 0) {
            samples.push({ done, rss: workers.map((w) => rssMb(w.pid)), connections: open })
            while (nextSample <= done) nextSample += tenth
          }
          for (const w of workers) if (!w.alive()) throw new Error(`worker ${w.pid} died:\n${w.tail()}`)
          return left === 0
        }, 600_000, 250)
        const drainS = (performance.now() - drainStarted) / 1000

        const exits = await Promise.all(workers.map((w) => stopWorker(w)))
        for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null })
        const totals = { done: 0, retried: 0, dead: 0 }
        for (const w of workers) {
          const line = w.kept.find((l) => l.startsWith("docket worker stopped:"))
          const m = /done (\d+), retried (\d+), dead (\d+)/.exec(line ?? "")
          expect(m, `worker ${w.pid}'s summary line:\n${w.tail()}`).not.toBeNull()
          totals.done += Number(m![1])
          totals.retried += Number(m![2])
          totals.dead += Number(m![3])
        }
        const dead = await pgCount(pool, "SELECT count(*) AS n FROM docket_items WHERE state = 'dead'")
        const first = samples[0]
        const last = samples[samples.length - 1]
        const failureRate = totals.retried / (totals.done + totals.retried + totals.dead)
        report("soak", {
          jobs,
          processes: 2,
          done: totals.done,
          retried: totals.retried,
          dead: totals.dead,
          failureRate: Math.round(failureRate * 1000) / 1000,
          enqueueS: Math.round(enqueuedS * 10) / 10,
          drainS: Math.round(drainS * 10) / 10,
          jobsPerS: Math.round(jobs / drainS),
          rssFirstTenthMb: first.rss.join("/"),
          rssEndMb: last.rss.join("/"),
          rssTrendMb: samples.map((s) => Math.max(...s.rss)).join(">"),
          connectionsFirstTenth: first.connections,
          connectionsEnd: last.connections,
          maxConnections,
          lost: jobs - totals.done - dead
        })
        // Every job done exactly once: the completions the workers counted are the jobs.
        expect(totals.done + dead).toBe(jobs)
        expect(totals.dead).toBe(dead)
        expect(failureRate).toBeGreaterThan(0.07)
        expect(failureRate).toBeLessThan(0.13)
        for (let i = 0; i < workers.length; i++) {
          expect(last.rss[i], `worker ${i + 1}: RSS ${first.rss[i]} MB after the first tenth, ${last.rss[i]} MB at the end`)
            .toBeLessThanOrEqual(first.rss[i] * RSS_FACTOR + RSS_SLACK_MB)
        }
        // Connections: each worker's pool opens connections on demand, up to its
        // bound (10, plus one for LISTEN), so a pool may still grow after the
        // first tenth; a leak would pass the bound.
        const bound = workers.length * (10 + 1)
        expect(maxConnections, `connections peaked at ${maxConnections}`).toBeLessThanOrEqual(bound)
      } finally {
        await Promise.all(workers.map((w) => killWorker(w)))
        await pool.end()
        await db.drop()
      }
    }, 900_000)
  })
