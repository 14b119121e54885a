/**
 * pg-boss 10.x. Its worker loop fetches `batchSize` jobs, runs them, then
 * sleeps for the rest of its polling interval whether or not it found work
 * (one fetch per loop per interval), and concurrency comes from calling
 * `work()` several times. With its defaults (batchSize 1, 2 s polling) ten
 * loops run 5 jobs/s, so both variants here take `concurrency` loops (so at
 * most `concurrency` handlers run at once) fetching batches of 500, each
 * batch's jobs run one after another in its loop:
 *
 * - `pg-boss`: default polling (2 s), defaults otherwise (supervise, schedule).
 * - `pg-boss-fast`: the minimum polling interval it accepts (0.5 s). pg-boss
 *   10.x has no NOTIFY/LISTEN wake-up (its `notifyWorker(id)` only wakes a
 *   worker loop of the same process), so polling is its only pickup path.
 *
 * Bulk: `boss.insert(jobs)` in batches of 5,000; one by one: `boss.send`.
 * Retries (W4): queue created with retryLimit 1, retryDelay 0 (whole seconds;
 * 0 is its minimum), no backoff; a failed job is picked up at a later poll.
 */
import PgBoss from "pg-boss"
import { pgProbe } from "./probes.js"
import type { Client, Contender, JobHandler, Payload, RunningWorker, Target, WorkerOptions } from "./types.js"
import { batches } from "./types.js"

const QUEUE = "bench"
const BATCH = Number(process.env.BENCH_PGBOSS_BATCH ?? 500)

const urlOf = (target: Target) => {
  if (target.store !== "pg") throw new Error("pg-boss runs on PostgreSQL")
  return target.url
}

const make = (pollingIntervalSeconds: number | undefined): Pick<Contender, "open" | "probe" | "startWorker"> => ({
  open: async (target, mode) => {
    // The enqueuer only sends: no maintenance or cron in this process.
    const boss = new PgBoss({ connectionString: urlOf(target), supervise: false, schedule: false })
    boss.on("error", () => {})
    await boss.start()
    await boss.createQueue(QUEUE, mode === "retry" ? { name: QUEUE, retryLimit: 1, retryDelay: 0, retryBackoff: false } : { name: QUEUE })
    const client: Client = {
      enqueueBulk: async (payloads) => {
        for (const batch of batches(payloads, 5000)) {
          await boss.insert(batch.map((data) => ({ name: QUEUE, data })))
        }
      },
      enqueueOne: async (payload) => {
        await boss.send(QUEUE, payload)
      },
      close: () => boss.stop({ graceful: false, wait: true })
    }
    return client
  },
  probe: (target) =>
    pgProbe(urlOf(target), `select count(*) as n from pgboss.job where name = '${QUEUE}' and state < 'completed'`),
  startWorker: async (target: Target, handler: JobHandler, options: WorkerOptions): Promise<RunningWorker> => {
    const boss = new PgBoss({
      connectionString: urlOf(target),
      ...(pollingIntervalSeconds === undefined ? {} : { pollingIntervalSeconds })
    })
    boss.on("error", () => {})
    await boss.start()
    const work = async (jobs: Array<PgBoss.Job<Payload>>) => {
      const failed: Array<string> = []
      for (const job of jobs) {
        try {
          await handler(job.data)
        } catch {
          failed.push(job.id)
        }
      }
      // pg-boss then completes the whole batch; a failed job is no longer
      // active, so its completion does not apply to it.
      if (failed.length > 0) await boss.fail(QUEUE, failed)
    }
    for (let i = 0; i < options.concurrency; i++) {
      await boss.work<Payload>(QUEUE, { batchSize: BATCH }, work)
    }
    return { stop: () => boss.stop({ graceful: true, wait: true, timeout: 10_000 }) }
  }
})

export const pgBoss: Contender = {
  name: "pg-boss",
  label: "pg-boss 10 (poll 2 s)",
  store: "pg",
  config: `work() x concurrency, batchSize ${BATCH}, default 2 s polling (batchSize 1 would run 5 jobs/s); bulk = boss.insert in batches of 5,000`,
  retryNote: "retryLimit 1, retryDelay 0 (whole seconds), picked up at the next poll",
  ...make(undefined)
}

export const pgBossFast: Contender = {
  name: "pg-boss-fast",
  label: "pg-boss 10 (poll 0.5 s)",
  store: "pg",
  config:
    `as pg-boss but pollingIntervalSeconds 0.5 (its minimum; 10.x has no NOTIFY wake-up across processes); batchSize ${BATCH}`,
  retryNote: "retryLimit 1, retryDelay 0 (whole seconds), picked up at the next poll",
  ...make(0.5)
}
