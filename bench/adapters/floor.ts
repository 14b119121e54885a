/**
 * The floor: no queue library, the fewest round trips a PostgreSQL queue with
 * durable enqueues and durable claims can make, for W3 only. It is not a
 * contender (no retries, leases, fencing or dedupe): it shows what this
 * machine's PostgreSQL costs before any library code runs, so W3's absolute
 * target can be read against it.
 *
 * - enqueue: one autocommit statement, an INSERT and a NOTIFY (one commit,
 *   flushed to disk);
 * - worker: LISTEN on its own connection; on a notification, one UPDATE ...
 *   FOR UPDATE SKIP LOCKED ... RETURNING on a second connection (one commit,
 *   flushed), the handler, then a DELETE of the finished rows on a third.
 * Plain `pg` clients and callbacks of their own: no pool, no Effect.
 */
import pg from "pg"
import { pgProbe } from "./probes.js"
import type { Client, Contender, JobHandler, RunningWorker, Target } from "./types.js"

const SCHEMA = `
CREATE TABLE IF NOT EXISTS floor_jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  payload text NOT NULL,
  running boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS floor_jobs_waiting ON floor_jobs (id) WHERE NOT running`

const ENQUEUE = `WITH ins AS (INSERT INTO floor_jobs (payload) VALUES ($1) RETURNING id)
SELECT pg_notify('floor_jobs', '') FROM ins`

const CLAIM = `UPDATE floor_jobs SET running = true
WHERE id IN (SELECT id FROM floor_jobs WHERE NOT running ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, payload`

const urlOf = (target: Target): string => {
  if (target.store !== "pg") throw new Error("the floor runs on PostgreSQL")
  return target.url
}

const connect = async (url: string, name: string) => {
  const client = new pg.Client({ connectionString: url, application_name: name })
  await client.connect()
  return client
}

const open = async (target: Target): Promise<Client> => {
  const client = await connect(urlOf(target), "floor-enqueue")
  await client.query(SCHEMA)
  return {
    enqueueBulk: () => Promise.reject(new Error("the floor measures W3 only")),
    enqueueOne: async (payload) => {
      await client.query(ENQUEUE, [JSON.stringify(payload)])
    },
    close: () => client.end()
  }
}

const startWorker = async (target: Target, handler: JobHandler, options: { readonly concurrency: number }): Promise<RunningWorker> => {
  const url = urlOf(target)
  const [listener, claimer, finisher] = await Promise.all([
    connect(url, "floor-listen"),
    connect(url, "floor-claim"),
    connect(url, "floor-finish")
  ])
  let stopped = false
  let again = false
  let running = 0
  let claiming: Promise<void> | undefined
  let idle: (() => void) | undefined
  let failure: unknown
  const failed = (error: unknown) => {
    failure ??= error
  }
  // One claim at a time; a wake-up during a claim claims again after it.
  const claimLoop = async (): Promise<void> => {
    do {
      again = false
      const free = options.concurrency - running
      if (stopped || free <= 0) return
      const { rows } = await claimer.query<{ id: string; payload: string }>(CLAIM, [free])
      for (const row of rows) {
        running++
        void Promise.resolve()
          .then(() => handler(JSON.parse(row.payload)))
          .then(() => finisher.query("DELETE FROM floor_jobs WHERE id = $1", [row.id]))
          .catch(failed)
          .finally(() => {
            running--
            if (running === 0 && idle !== undefined) idle()
            claim()
          })
      }
      if (rows.length === free) again = true
    } while (again)
  }
  const claim = () => {
    if (claiming !== undefined) {
      again = true
      return
    }
    claiming = claimLoop().catch(failed).finally(() => {
      claiming = undefined
    })
  }
  listener.on("notification", claim)
  await listener.query("LISTEN floor_jobs")
  claim()
  return {
    stop: async () => {
      stopped = true
      // A claim in flight may still hand out rows: wait for it and for them.
      while (running > 0 || claiming !== undefined) {
        if (claiming !== undefined) await claiming
        if (running > 0) await new Promise<void>((resolve) => (idle = resolve))
      }
      await Promise.all([listener.end(), claimer.end(), finisher.end()])
      if (failure !== undefined) throw failure
    }
  }
}

export const floor: Contender = {
  name: "pg-floor",
  label: "floor: no library (PostgreSQL)",
  store: "pg",
  baseline: true,
  workloads: ["W3"],
  config:
    "not a queue: plain pg clients; enqueue = one INSERT + NOTIFY statement (one flushed commit); " +
    "worker = LISTEN, then UPDATE ... FOR UPDATE SKIP LOCKED RETURNING (one flushed commit) and a DELETE after the handler",
  retryNote: "none (W3 only)",
  open: (target) => open(target),
  probe: (target) => pgProbe(urlOf(target), "SELECT count(*) AS n FROM floor_jobs"),
  startWorker
}
