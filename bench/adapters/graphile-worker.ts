/**
 * graphile-worker (the devDependency, 0.18), two ways:
 *
 * - `graphile-worker`: its defaults (pool of 10 connections, LISTEN/NOTIFY,
 *   2 s poll; one `get_job` and one `complete_job` statement per job). Bulk:
 *   its SQL `add_jobs(job_spec[])`.
 * - `graphile-worker-lq`: its documented high-throughput settings,
 *   `localQueue: { size: 500 }`, `completeJobBatchDelay: 0`,
 *   `failJobBatchDelay: 0` (the configuration of its performance page; these
 *   options arrived in 0.17). Bulk: `workerUtils.addJobs`.
 *
 * Retries: graphile-worker's delay is fixed in its SQL, exp(min(attempts, 10))
 * seconds: 2.7 s after the first failure. It has no setting for less.
 */
import { createRequire } from "node:module"
import { pgProbe } from "./probes.js"
import type { Client, Contender, JobHandler, Payload, RunningWorker, Target, WorkerOptions } from "./types.js"
import { batches, packageVersion } from "./types.js"

type GW = typeof import("graphile-worker")

const requireLocal = createRequire(import.meta.url)
const lib = (): GW => requireLocal("graphile-worker") as GW

const urlOf = (target: Target) => {
  if (target.store !== "pg") throw new Error("graphile-worker runs on PostgreSQL")
  return target.url
}

const silent = (gw: GW) => new gw.Logger(() => () => {})

const BULK_BATCH = 5000

const make = (variant: "default" | "lq"): Pick<Contender, "open" | "probe" | "startWorker"> => {
  return {
    open: async (target) => {
      const gw = lib()
      const connectionString = urlOf(target)
      await gw.runMigrations({ connectionString, logger: silent(gw) })
      const utils = await gw.makeWorkerUtils({ connectionString, logger: silent(gw) })
      const spec = (p: Payload) => ({ identifier: "bench", payload: p })
      const client: Client = {
        enqueueBulk: async (payloads) => {
          for (const batch of batches(payloads, BULK_BATCH)) {
            if (variant === "lq") {
              await utils.addJobs(batch.map(spec))
            } else {
              await utils.withPgClient((pg) =>
                pg.query(
                  `select count(*) from graphile_worker.add_jobs(
                     array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)))`,
                  [JSON.stringify(batch.map(spec))]
                )
              )
            }
          }
        },
        enqueueOne: async (payload) => {
          await utils.addJob("bench", payload)
        },
        close: async () => {
          await utils.release()
        }
      }
      return client
    },
    probe: (target) => pgProbe(urlOf(target), "select count(*) as n from graphile_worker._private_jobs"),
    startWorker: async (target: Target, handler: JobHandler, options: WorkerOptions): Promise<RunningWorker> => {
      const gw = lib()
      const runner = await gw.run({
        connectionString: urlOf(target),
        concurrency: options.concurrency,
        noHandleSignals: true,
        logger: silent(gw),
        taskList: { bench: async (payload) => handler(payload as Payload) },
        ...(variant === "lq"
          ? {
            preset: {
              worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 }
            } as never
          }
          : {})
      })
      return { stop: () => runner.stop() }
    }
  }
}

export const graphileWorker: Contender = {
  name: "graphile-worker",
  label: `graphile-worker ${loadVersion()}`,
  store: "pg",
  config: "defaults (concurrency = run's, pool 10, LISTEN/NOTIFY, poll 2 s); bulk = SQL add_jobs(job_spec[]) in batches of 5,000",
  retryNote: "fixed in its SQL: exp(1) = 2.7 s after the first failure (not configurable)",
  ...make("default")
}

export const graphileWorkerLocalQueue: Contender = {
  name: "graphile-worker-lq",
  label: `graphile-worker ${loadVersion()} local queue`,
  store: "pg",
  config:
    "its performance-page settings: localQueue { size: 500 }, completeJobBatchDelay 0, failJobBatchDelay 0; bulk = workerUtils.addJobs in batches of 5,000",
  retryNote: "fixed in its SQL: exp(1) = 2.7 s after the first failure (not configurable)",
  ...make("lq")
}

function loadVersion(): string {
  return packageVersion("graphile-worker") ?? "?"
}
