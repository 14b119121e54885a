/**
 * BullMQ 5 on the local Redis: defaults (completed jobs kept), a Redis key
 * prefix of its own per run (so a run starts empty and is removed after).
 * Bulk: `queue.addBulk` in batches of 1,000; one by one: `queue.add`.
 * Retries (W4): `attempts: 2, backoff: { type: "fixed", delay: 0 }` (a 0 ms
 * retry goes straight back to the wait list).
 */
import { Queue, Worker } from "bullmq"
import type { Client, Contender, JobHandler, Payload, Probe, RunningWorker, Target, WorkerOptions } from "./types.js"
import { batches } from "./types.js"

const QUEUE = "bench"

type RedisTarget = Extract<Target, { store: "redis" }>

const redisOf = (target: Target): RedisTarget => {
  if (target.store !== "redis") throw new Error("BullMQ runs on Redis")
  return target
}

export const connectionOf = (target: RedisTarget) => {
  const url = new URL(target.url)
  return { host: url.hostname, port: Number(url.port || 6379), db: target.db }
}

const queueOf = (target: RedisTarget) => new Queue(QUEUE, { connection: connectionOf(target), prefix: target.prefix })

/** A section of Redis's INFO. */
export const redisInfo = async (target: RedisTarget, section: string): Promise<string> => {
  const queue = queueOf(target)
  try {
    const client = (await queue.client) as unknown as { info: (section: string) => Promise<string> }
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
  const queue = queueOf(target)
  try {
    await queue.obliterate({ force: true })
  } finally {
    await queue.close()
  }
}

export const bullmq: Contender = {
  name: "bullmq",
  label: "BullMQ 5 (Redis)",
  store: "redis",
  config: "defaults (completed jobs kept); bulk = queue.addBulk in batches of 1,000",
  retryNote: "attempts 2, backoff { type: \"fixed\", delay: 0 }",
  open: async (target, mode) => {
    const queue = queueOf(redisOf(target))
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
    const queue = queueOf(redisOf(target))
    return {
      pending: async () => {
        const counts = await queue.getJobCounts("wait", "active", "delayed", "prioritized", "paused", "waiting-children")
        return Object.values(counts).reduce((a, b) => a + b, 0)
      },
      close: () => queue.close()
    }
  },
  startWorker: async (target: Target, handler: JobHandler, options: WorkerOptions): Promise<RunningWorker> => {
    const redis = redisOf(target)
    const worker = new Worker<Payload>(QUEUE, async (job) => handler(job.data), {
      connection: connectionOf(redis),
      prefix: redis.prefix,
      concurrency: options.concurrency
    })
    worker.on("error", () => {})
    await worker.waitUntilReady()
    return { stop: () => worker.close() }
  }
}
