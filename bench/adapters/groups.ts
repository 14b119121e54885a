/**
 * The contenders of the groups benchmark (bench/groups.ts, issue 36): each
 * library's own way of running a group's items one at a time in enqueue
 * order (a sequence), or at most N of a group at once.
 *
 * - Docket: the handler's `perGroup: { concurrency, ordered }`, items enqueued
 *   with `{ group }` (`QueueRepo.enqueueMany`, batches of 2,000).
 * - graphile-worker 0.18: a named queue per group (`queueName`): its jobs run
 *   one at a time, in id order (its `get_job` takes a queue's oldest job and
 *   locks the queue until it finishes). It has no per-queue limit above 1.
 *   Bulk: `workerUtils.addJobs`. Two configurations, as in the main benchmark:
 *   defaults, and its performance page's local queue.
 * - pg-boss 12 `key_strict_fifo`: the queue policy whose fetch takes only each
 *   key's head (the oldest unfinished job of a `singletonKey`) and skips a key
 *   with an active, retrying or failed job: one at a time per key, in order.
 *   Its order is `created_on, id`; a bulk insert gives a batch one
 *   `created_on` and random uuids, so its own ids would run a batch in random
 *   order: the adapter gives each job an id that sorts in enqueue order.
 * - pg-boss 12 groups: a job's `group: { id }` and the worker's
 *   `groupConcurrency: N` (counted in the database, across processes). It
 *   limits a group's active jobs but keeps no order inside a group (its fetch
 *   orders by priority and `created_on` over the whole queue), so it is the
 *   peer for N at a time, not for sequences.
 *
 * pg-boss runs with its fast settings (bench/adapters/pg-boss.ts: LISTEN/NOTIFY,
 * burst when a batch is full, 0.5 s polling), `localConcurrency` = slots,
 * batches of BENCH_PGBOSS_BATCH (default 500) run one after another in each loop.
 */
import { createRequire } from "node:module"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import { PgBoss, type JobResult } from "pg-boss"
import { Docket, Handler, QueueRepo } from "../../src/index.js"
import type { Target } from "./types.js"
import { batches, packageVersion } from "./types.js"

/** A job of the groups benchmark: its index in enqueue order, its group, its enqueue time (`now()` of protocol.ts). */
export interface GroupPayload {
  readonly i: number
  readonly g: number
  readonly t: number
}

/** How a kind limits its groups; `null`: no groups at all (the ungrouped baseline). */
export type GroupLimit = { readonly concurrency: number; readonly ordered: boolean } | null

export interface GroupClient {
  readonly enqueueBulk: (payloads: ReadonlyArray<GroupPayload>) => Promise<void>
  readonly close: () => Promise<void>
}

export interface GroupSystem {
  readonly name: GroupSystemName
  readonly label: string
  readonly stores: ReadonlyArray<"pg" | "sqlite">
  /** Why it cannot give this limit (undefined: it can). */
  readonly unsupported: (limit: GroupLimit) => string | undefined
  /** The configuration measured, one line. */
  readonly config: string
  readonly open: (target: Target, limit: GroupLimit) => Promise<GroupClient>
  readonly startWorker: (
    target: Target,
    handler: (payload: GroupPayload) => void,
    options: { readonly concurrency: number; readonly limit: GroupLimit }
  ) => Promise<{ readonly stop: () => Promise<void> }>
}

export const GROUP_SYSTEMS = ["docket", "graphile-worker", "graphile-worker-lq", "pg-boss-fifo", "pg-boss-groups"] as const
export type GroupSystemName = (typeof GROUP_SYSTEMS)[number]

const groupName = (g: number) => `g${g}`

// ---------------------------------------------------------------- Docket

const KIND = "seq"
const DocketPayload = Schema.Struct({ i: Schema.Number, g: Schema.Number, t: Schema.Number })
const quiet = Logger.minimumLogLevel(LogLevel.Warning)

const databaseOf = (target: Target): string => {
  if (target.store === "pg") return target.url
  if (target.store === "sqlite") return target.file
  throw new Error("Docket runs on PostgreSQL or SQLite")
}

const docket: GroupSystem = {
  name: "docket",
  label: "Docket",
  stores: ["pg", "sqlite"],
  unsupported: () => undefined,
  config: "Docket.layer defaults, concurrency = slots, handler perGroup = the run's limit; bulk = QueueRepo.enqueueMany with { group } in batches of 2,000",
  open: async (target) => {
    const runtime = ManagedRuntime.make(Docket.layerClient(databaseOf(target)).pipe(Layer.provide(quiet)))
    await runtime.runtime()
    return {
      enqueueBulk: async (payloads) => {
        for (const batch of batches(payloads, 2000)) {
          await runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (repo) =>
            repo.enqueueMany(batch.map((payload) => ({ kind: KIND, payload, group: groupName(payload.g) })))))
        }
      },
      close: () => runtime.dispose()
    }
  },
  startWorker: async (target, handler, { concurrency, limit }) => {
    const seq = Handler.make(KIND, {
      payload: DocketPayload,
      ...(limit === null ? {} : { perGroup: limit }),
      run: (payload) => Effect.sync(() => handler(payload))
    })
    const runtime = ManagedRuntime.make(
      Docket.layer({ database: databaseOf(target), handlers: [seq], concurrency }).pipe(Layer.provide(quiet))
    )
    await runtime.runtime()
    return { stop: () => runtime.dispose() }
  }
}

// ---------------------------------------------------------------- graphile-worker

type GW = typeof import("graphile-worker")
const requireLocal = createRequire(import.meta.url)
const gwLib = (): GW => requireLocal("graphile-worker") as GW
const silent = (gw: GW) => new gw.Logger(() => () => {})

const pgUrl = (target: Target, who: string) => {
  if (target.store !== "pg") throw new Error(`${who} runs on PostgreSQL`)
  return target.url
}

const onlySequences = (limit: GroupLimit) =>
  limit !== null && (limit.concurrency !== 1 || !limit.ordered)
    ? "a named queue runs one job at a time, in order; there is no limit above 1 per queue"
    : undefined

const graphile = (lq: boolean): GroupSystem => ({
  name: lq ? "graphile-worker-lq" : "graphile-worker",
  label: `graphile-worker ${packageVersion("graphile-worker") ?? "?"}${lq ? " local queue" : ""}`,
  stores: ["pg"],
  unsupported: onlySequences,
  config: `queueName = the group (one job at a time per named queue)${
    lq ? "; localQueue { size: 500 }, completeJobBatchDelay 0, failJobBatchDelay 0" : "; defaults"
  }; bulk = workerUtils.addJobs in batches of 5,000`,
  open: async (target, limit) => {
    const gw = gwLib()
    const connectionString = pgUrl(target, "graphile-worker")
    await gw.runMigrations({ connectionString, logger: silent(gw) })
    const utils = await gw.makeWorkerUtils({ connectionString, logger: silent(gw) })
    return {
      enqueueBulk: async (payloads) => {
        for (const batch of batches(payloads, 5000)) {
          await utils.addJobs(batch.map((payload) => ({
            identifier: KIND,
            payload,
            ...(limit === null ? {} : { queueName: groupName(payload.g) })
          })))
        }
      },
      close: async () => {
        await utils.release()
      }
    }
  },
  startWorker: async (target, handler, { concurrency }) => {
    const gw = gwLib()
    const runner = await gw.run({
      connectionString: pgUrl(target, "graphile-worker"),
      concurrency,
      noHandleSignals: true,
      logger: silent(gw),
      taskList: { [KIND]: async (payload) => handler(payload as GroupPayload) },
      ...(lq ? { preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } as never } : {})
    })
    return { stop: () => runner.stop() }
  }
})

// ---------------------------------------------------------------- pg-boss

const QUEUE = "seq"
const PGBOSS_BATCH = Number(process.env.BENCH_PGBOSS_BATCH ?? 500)

/** A uuid that sorts (as pg-boss compares them) in enqueue order: index `i` in its last 12 hex digits. */
export const orderedUuid = (i: number): string => `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`

const pgBoss = (mode: "fifo" | "groups"): GroupSystem => ({
  name: mode === "fifo" ? "pg-boss-fifo" : "pg-boss-groups",
  label: `pg-boss ${packageVersion("pg-boss") ?? "?"} ${mode === "fifo" ? "key_strict_fifo" : "groupConcurrency"}`,
  stores: ["pg"],
  unsupported: mode === "fifo"
    ? onlySequences
    : (limit) => limit?.ordered === true ? "groupConcurrency keeps no order inside a group" : undefined,
  config: (mode === "fifo"
    ? "queue policy key_strict_fifo, singletonKey = the group, ids that sort in enqueue order"
    : "job group { id: the group }, work({ groupConcurrency: the run's limit })") +
    `; useListenNotify + queue notify, burstWhenBatchFull, polling 0.5 s, localConcurrency = slots, batchSize ${PGBOSS_BATCH}, perJobResults; bulk = boss.insert in batches of 5,000`,
  open: async (target, limit) => {
    const boss = new PgBoss({ connectionString: pgUrl(target, "pg-boss"), supervise: false, schedule: false })
    boss.on("error", () => {})
    await boss.start()
    await boss.createQueue(QUEUE, { notify: true, ...(mode === "fifo" && limit !== null ? { policy: "key_strict_fifo" } : {}) })
    return {
      enqueueBulk: async (payloads) => {
        for (const batch of batches(payloads, 5000)) {
          await boss.insert(QUEUE, batch.map((data) => {
            if (limit === null) return { data }
            return mode === "fifo"
              ? { id: orderedUuid(data.i), data, singletonKey: groupName(data.g) }
              : { data, group: { id: groupName(data.g) } }
          }))
        }
      },
      close: () => boss.stop({ graceful: false })
    }
  },
  startWorker: async (target, handler, { concurrency, limit }) => {
    const boss = new PgBoss({ connectionString: pgUrl(target, "pg-boss"), useListenNotify: true })
    boss.on("error", () => {})
    await boss.start()
    await boss.work<GroupPayload>(
      QUEUE,
      {
        batchSize: PGBOSS_BATCH,
        localConcurrency: concurrency,
        perJobResults: true,
        pollingIntervalSeconds: 0.5,
        notifyPollingIntervalSeconds: 0.5,
        burstWhenBatchFull: true,
        ...(mode === "groups" && limit !== null ? { groupConcurrency: limit.concurrency } : {})
      },
      async (jobs) => {
        const results: Array<JobResult> = []
        for (const job of jobs) {
          handler(job.data)
          results.push({ id: job.id, status: "completed" })
        }
        return results
      }
    )
    return { stop: () => boss.stop({ graceful: true, timeout: 10_000 }) }
  }
})

export const loadGroupSystem = (name: GroupSystemName): GroupSystem => {
  switch (name) {
    case "docket":
      return docket
    case "graphile-worker":
      return graphile(false)
    case "graphile-worker-lq":
      return graphile(true)
    case "pg-boss-fifo":
      return pgBoss("fifo")
    case "pg-boss-groups":
      return pgBoss("groups")
  }
}
