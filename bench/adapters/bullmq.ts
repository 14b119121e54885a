/**
 * BullMQ 6, on two backends:
 *
 * - `bullmq`: the local Redis (through ioredis, which BullMQ 6 takes as an
 *   optional peer dependency), defaults (completed jobs kept), a Redis key
 *   prefix of its own per run (so a run starts empty and is removed after).
 * - `bullmq-pg`: its PostgreSQL backend, new in 6 (`createPostgresBackend`,
 *   passed to `Queue` and `Worker`): a `pg.Pool` (node-postgres defaults, 10
 *   connections) plus one LISTEN connection per worker for the blocking wait;
 *   the schema is installed by the enqueuer (`migrate: true`) in the run's
 *   fresh database, defaults otherwise.
 *
 * Bulk: `queue.addBulk` in batches of 1,000; one by one: `queue.add`.
 * Retries (W4): `attempts: 2, backoff: { type: "fixed", delay: 0 }` (a 0 ms
 * retry goes straight back to the wait list).
 */
import { createPostgresBackend, type PostgresConnectionOptions, type PostgresQueueBackend, Queue, Worker } from "bullmq"
import type { Client, Contender, JobHandler, Payload, Probe, RunningWorker, Target, WorkerOptions } from "./types.js"
import { batches, packageVersion } from "./types.js"

const QUEUE = "bench"
const VERSION = packageVersion("bullmq") ?? "?"

type RedisTarget = Extract<Target, { store: "redis" }>

const redisOf = (target: Target): RedisTarget => {
  if (target.store !== "redis") throw new Error("this BullMQ contender runs on Redis")
  return target
}

export const connectionOf = (target: RedisTarget) => {
  const url = new URL(target.url)
  return { host: url.hostname, port: Number(url.port || 6379), db: target.db }
}

const redisQueue = (target: RedisTarget) => new Queue(QUEUE, { connection: connectionOf(target), prefix: target.prefix })

/** A section of Redis's INFO. */
export const redisInfo = async (target: RedisTarget, section: string): Promise<string> => {
  const queue = redisQueue(target)
  try {
    const client = (await queue.backend.client) as unknown as { info: (section: string) => Promise<string> }
    return await client.info(section)
  } finally {
    await queue.close()
  }
}

/** Redis's count of commands processed (server-wide), for commands per job. */
export const commandsProcessed = async (target: RedisTarget): Promise<number> =>
  Number(/total_commands_processed:(\d+)/.exec(await redisInfo(target, "stats"))?.[1] ?? NaN)

/** Removes every key of the run's queue. */
export const removeQueue = async (target: RedisTarget): Promise<void> => {
  const queue = redisQueue(target)
  try {
    await queue.obliterate({ force: true })
  } finally {
    await queue.close()
  }
}

/** The part of Queue the adapter uses, the same on both backends. */
interface AnyQueue {
  readonly waitUntilReady: () => Promise<unknown>
  readonly addBulk: (jobs: Array<{ name: string; data: Payload; opts?: object }>) => Promise<unknown>
  readonly add: (name: string, data: Payload, opts?: object) => Promise<unknown>
  readonly getJobCounts: (...types: Array<string>) => Promise<Record<string, number>>
  readonly close: () => Promise<void>
}

interface AnyWorker {
  readonly on: (event: "error", listener: () => void) => unknown
  readonly waitUntilReady: () => Promise<unknown>
  readonly close: () => Promise<void>
}

interface Backend {
  readonly queue: (target: Target, migrate: boolean) => AnyQueue
  readonly worker: (target: Target, handler: JobHandler, concurrency: number) => AnyWorker
}

const onRedis: Backend = {
  queue: (target) => redisQueue(redisOf(target)) as unknown as AnyQueue,
  worker: (target, handler, concurrency) => {
    const redis = redisOf(target)
    return new Worker<Payload>(QUEUE, async (job) => handler(job.data), {
      connection: connectionOf(redis),
      prefix: redis.prefix,
      concurrency
    }) as unknown as AnyWorker
  }
}

const pgUrlOf = (target: Target) => {
  if (target.store !== "pg") throw new Error("bullmq-pg runs on PostgreSQL")
  return target.url
}

const onPg: Backend = {
  queue: (target, migrate) =>
    new Queue(QUEUE, { connection: { connectionString: pgUrlOf(target), ...(migrate ? { migrate: true } : {}) } }, createPostgresBackend) as unknown as AnyQueue,
  worker: (target, handler, concurrency) =>
    new Worker<Payload, unknown, string, PostgresQueueBackend, number, PostgresConnectionOptions>(
      QUEUE,
      async (job) => handler(job.data),
      { connection: { connectionString: pgUrlOf(target) }, concurrency },
      createPostgresBackend
    ) as unknown as AnyWorker
}

const make = (backend: Backend): Pick<Contender, "open" | "probe" | "startWorker"> => ({
  open: async (target, mode) => {
    const queue = backend.queue(target, true)
    await queue.waitUntilReady()
    const opts = mode === "retry" ? { attempts: 2, backoff: { type: "fixed", delay: 0 } } : undefined
    const client: Client = {
      enqueueBulk: async (payloads) => {
        for (const batch of batches(payloads, 1000)) {
          await queue.addBulk(batch.map((data) => ({ name: QUEUE, data, ...(opts === undefined ? {} : { opts }) })))
        }
      },
      enqueueOne: async (payload) => {
        await queue.add(QUEUE, payload, opts)
      },
      close: () => queue.close()
    }
    return client
  },
  probe: async (target): Promise<Probe> => {
    const queue = backend.queue(target, false)
    return {
      pending: async () => {
        const counts = await queue.getJobCounts("wait", "active", "delayed", "prioritized", "paused", "waiting-children")
        return Object.values(counts).reduce((a, b) => a + b, 0)
      },
      close: () => queue.close()
    }
  },
  startWorker: async (target: Target, handler: JobHandler, options: WorkerOptions): Promise<RunningWorker> => {
    const worker = backend.worker(target, handler, options.concurrency)
    worker.on("error", () => {})
    await worker.waitUntilReady()
    return { stop: () => worker.close() }
  }
})

const RETRY_NOTE = "attempts 2, backoff { type: \"fixed\", delay: 0 }"

export const bullmq: Contender = {
  name: "bullmq",
  label: `BullMQ ${VERSION} (Redis)`,
  store: "redis",
  config: "Redis backend (ioredis), defaults (completed jobs kept); bulk = queue.addBulk in batches of 1,000",
  retryNote: RETRY_NOTE,
  ...make(onRedis)
}

export const bullmqPg: Contender = {
  name: "bullmq-pg",
  label: `BullMQ ${VERSION} (PostgreSQL)`,
  store: "pg",
  config:
    "PostgreSQL backend (createPostgresBackend; pg.Pool of 10 + a LISTEN connection), defaults (completed jobs kept); bulk = queue.addBulk in batches of 1,000",
  retryNote: RETRY_NOTE,
  ...make(onPg)
}
