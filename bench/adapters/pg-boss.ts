/**
 * pg-boss 12. A worker (`work()` with `localConcurrency` loops) fetches
 * `batchSize` jobs per loop, runs them, and then waits for its polling interval
 * before the next fetch unless a burst trigger says there is more. With its
 * defaults (batchSize 1, 2 s polling) ten loops run 5 jobs/s, so both variants
 * here take `concurrency` loops (so at most `concurrency` handlers run at once)
 * fetching batches of 500, each batch's jobs run one after another in its loop,
 * each job settled on its own (`perJobResults`):
 *
 * - `pg-boss`: default polling (2 s), defaults otherwise (supervise, schedule).
 * - `pg-boss-fast`: its documented fast path in 12: `useListenNotify` (one
 *   LISTEN connection per instance) with the queue's `notify: true` (a NOTIFY
 *   per created job wakes idle workers), `burstWhenBatchFull` (a full batch
 *   is followed by the next fetch at once) and the minimum polling interval
 *   (0.5 s, `notifyPollingIntervalSeconds` too: its default 30 s backstop is
 *   what picks up a retry, which sends no NOTIFY) as the backstop.
 *
 * Bulk: `boss.insert(name, jobs)` in batches of 5,000; one by one: `boss.send`.
 * Retries (W4): queue created with retryLimit 1, retryDelay 0 (whole seconds;
 * 0 is its minimum), no backoff; a failed job is picked up at a later fetch.
 */
import { PgBoss, type JobResult, type Queue } from "pg-boss"
import { pgProbe } from "./probes.js"
import type { Client, Contender, JobHandler, Payload, RunningWorker, Target, WorkerOptions } from "./types.js"
import { batches, packageVersion } from "./types.js"

const QUEUE = "bench"
const BATCH = Number(process.env.BENCH_PGBOSS_BATCH ?? 500)
const VERSION = packageVersion("pg-boss") ?? "?"

const urlOf = (target: Target) => {
  if (target.store !== "pg") throw new Error("pg-boss runs on PostgreSQL")
  return target.url
}

const make = (fast: boolean): Pick<Contender, "open" | "probe" | "startWorker"> => ({
  open: async (target, mode) => {
    // The enqueuer only sends: no maintenance or cron in this process.
    const boss = new PgBoss({ connectionString: urlOf(target), supervise: false, schedule: false })
    boss.on("error", () => {})
    await boss.start()
    const queue: Omit<Queue, "name"> = {
      ...(mode === "retry" ? { retryLimit: 1, retryDelay: 0, retryBackoff: false } : {}),
      ...(fast ? { notify: true } : {})
    }
    await boss.createQueue(QUEUE, queue)
    const client: Client = {
      enqueueBulk: async (payloads) => {
        for (const batch of batches(payloads, 5000)) {
          await boss.insert(QUEUE, batch.map((data) => ({ data })))
        }
      },
      enqueueOne: async (payload) => {
        await boss.send(QUEUE, payload)
      },
      close: () => boss.stop({ graceful: false })
    }
    return client
  },
  probe: (target) =>
    pgProbe(urlOf(target), `select count(*) as n from pgboss.job where name = '${QUEUE}' and state < 'completed'`),
  startWorker: async (target: Target, handler: JobHandler, options: WorkerOptions): Promise<RunningWorker> => {
    const boss = new PgBoss({ connectionString: urlOf(target), ...(fast ? { useListenNotify: true } : {}) })
    boss.on("error", () => {})
    await boss.start()
    await boss.work<Payload>(
      QUEUE,
      {
        batchSize: BATCH,
        localConcurrency: options.concurrency,
        perJobResults: true,
        ...(fast ? { pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5, burstWhenBatchFull: true } : {})
      },
      async (jobs) => {
        const results: Array<JobResult> = []
        for (const job of jobs) {
          try {
            await handler(job.data)
            results.push({ id: job.id, status: "completed" })
          } catch {
            results.push({ id: job.id, status: "failed" })
          }
        }
        return results
      }
    )
    return { stop: () => boss.stop({ graceful: true, timeout: 10_000 }) }
  }
})

export const pgBoss: Contender = {
  name: "pg-boss",
  label: `pg-boss ${VERSION} (poll 2 s)`,
  store: "pg",
  config:
    `work() with localConcurrency = run's, batchSize ${BATCH}, perJobResults, default 2 s polling (batchSize 1 would run 5 jobs/s); bulk = boss.insert in batches of 5,000`,
  retryNote: "retryLimit 1, retryDelay 0 (whole seconds), picked up at a later fetch",
  ...make(false)
}

export const pgBossFast: Contender = {
  name: "pg-boss-fast",
  label: `pg-boss ${VERSION} (LISTEN/NOTIFY, burst)`,
  store: "pg",
  config:
    `as pg-boss plus useListenNotify + queue notify: true (NOTIFY wake-up), burstWhenBatchFull, pollingIntervalSeconds and notifyPollingIntervalSeconds 0.5 (its minimum; a retry sends no NOTIFY) as backstop; batchSize ${BATCH}`,
  retryNote: "retryLimit 1, retryDelay 0 (whole seconds), picked up at a later fetch",
  ...make(true)
}
