/**
 * Docket, through its public API: `Docket.layerClient` + `QueueRepo.enqueueMany`
 * (bulk, in batches) / `QueueRepo.enqueue` for the enqueuer, `Docket.layer`
 * with one handler for the worker. Defaults everywhere (concurrency set by the
 * run; prefetch = concurrency; SQLite `synchronous = FULL`), except W4's
 * handler backoff: `Backoff.constant("0 millis")`.
 */
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import { Backoff, type Database, Docket, Handler, QueueRepo, Retry, Worker } from "../../src/index.js"
import { docketBacklog } from "./docket-backlog.js"
import { pgProbe, sqliteProbe } from "./probes.js"
import type { Client, Contender, JobHandler, Mode, Payload, RunningWorker, Target, WorkerOptions } from "./types.js"
import { batches } from "./types.js"

const KIND = "bench"
/** Rows per `enqueueMany` statement (measured: 1,000 to 5,000 are within noise of each other). */
export const BULK_BATCH = Number(process.env.BENCH_DOCKET_BATCH ?? 2000)

const BenchPayload = Schema.Struct({ i: Schema.Number, t: Schema.Number })

/**
 * Diagnostics only: extra `Docket.layer` options as JSON (e.g.
 * `BENCH_DOCKET_OPTIONS='{"poll":"100 millis"}'`). Unset in the published runs.
 */
const extraOptions = JSON.parse(process.env.BENCH_DOCKET_OPTIONS ?? "{}") as Record<string, unknown>

const databaseOf = (target: Target): string => {
  if (target.store === "pg") return target.url
  if (target.store === "sqlite") return target.file
  throw new Error("Docket runs on PostgreSQL or SQLite")
}

// The peers' logs are silenced too; W4 would otherwise print a line per retry.
const quiet = Logger.minimumLogLevel(LogLevel.Warning)

const clientOver = <E>(runtime: ManagedRuntime.ManagedRuntime<QueueRepo.QueueRepo, E>, closeRuntime: boolean): Client => ({
  enqueueBulk: async (payloads) => {
    for (const batch of batches(payloads, BULK_BATCH)) {
      await runtime.runPromise(
        Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueueMany(batch.map((payload) => ({ kind: KIND, payload }))))
      )
    }
  },
  enqueueOne: async (payload) => {
    await runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue(KIND, payload)))
  },
  close: async () => {
    if (closeRuntime) await runtime.dispose()
  }
})

/** Where Docket connects for a target: its URL and database options (through PgBouncer: docket-pgbouncer.ts). */
export type Connect = (target: Target) => { readonly database: string; readonly databaseOptions?: Database.Options }

const direct: Connect = (target) => ({ database: databaseOf(target) })

/** The parent's enqueuer, connected by `connect`. */
export const openWith = (connect: Connect) => async (target: Target, _mode: Mode): Promise<Client> => {
  const { database, databaseOptions } = connect(target)
  const runtime = ManagedRuntime.make(Docket.layerClient(database, { databaseOptions }).pipe(Layer.provide(quiet)))
  await runtime.runtime()
  return clientOver(runtime, true)
}

const open = openWith(direct)

const toEffect = (handler: JobHandler) => (payload: Payload): Effect.Effect<void, Retry> =>
  Effect.suspend(() => {
    try {
      const result = handler(payload)
      if (result !== undefined && typeof (result as Promise<void>).then === "function") {
        return Effect.tryPromise({ try: () => result as Promise<void>, catch: (e) => new Retry({ reason: String(e) }) })
      }
      return Effect.void
    } catch (e) {
      return Effect.fail(new Retry({ reason: String(e) }))
    }
  })

/** The child's worker, connected by `connect`. */
export const startWorkerWith = (connect: Connect) =>
async (target: Target, handler: JobHandler, options: WorkerOptions): Promise<RunningWorker> => {
  const { database, databaseOptions } = connect(target)
  const bench = Handler.make(KIND, {
    payload: BenchPayload,
    run: toEffect(handler),
    ...(options.mode === "retry" ? { backoff: Backoff.constant("0 millis") } : {})
  })
  // Provided (built first), not merged: the pool's fibers are forked while the
  // layer is built and keep the log level they were forked with.
  const runtime = ManagedRuntime.make(
    Docket.layer({ ...extraOptions, database, databaseOptions, handlers: [bench], concurrency: options.concurrency }).pipe(
      Layer.provide(quiet)
    )
  )
  await runtime.runtime()
  return {
    stop: () => runtime.dispose(),
    client: clientOver(runtime, false),
    stats: async () => ({ ...(await runtime.runPromise(Effect.flatMap(Worker.Worker, (w) => w.counters))) })
  }
}

const startWorker = startWorkerWith(direct)

/** Docket's configuration note (the BENCH_DOCKET_OPTIONS in use, if any). */
export function extraNote(): string {
  return Object.keys(extraOptions).length === 0 ? "" : ` + BENCH_DOCKET_OPTIONS ${JSON.stringify(extraOptions)}`
}

// Pending = waiting or running. Two counts over the partial indexes of those
// states (claim, lease), not a scan of the table: finished items (done,
// cancelled, dead) kept for their history must not slow the probe as they pile up.
export const COUNT = `SELECT (SELECT count(*) FROM docket_items WHERE state = 'waiting')
  + (SELECT count(*) FROM docket_items WHERE state = 'running') AS n`

export const docketPg: Contender = {
  name: "docket-pg",
  label: "Docket (PostgreSQL)",
  store: "pg",
  docket: true,
  config: `Docket.layer defaults${extraNote()} (concurrency = run's, poll 2 s, LISTEN/NOTIFY); bulk = QueueRepo.enqueueMany in batches of ${BULK_BATCH}`,
  retryNote: "handler backoff Backoff.constant(\"0 millis\")",
  open,
  backlog: docketBacklog,
  probe: (target) => pgProbe((target as Extract<Target, { store: "pg" }>).url, COUNT),
  startWorker
}

export const docketSqlite: Contender = {
  name: "docket-sqlite",
  label: "Docket (SQLite)",
  store: "sqlite",
  docket: true,
  latencyInProcess: true,
  config:
    `Docket.layer defaults${extraNote()} on a temp file (WAL, synchronous = FULL); bulk = QueueRepo.enqueueMany in batches of ${BULK_BATCH}; W3 enqueues inside the worker process (in-process wake-up)`,
  retryNote: "handler backoff Backoff.constant(\"0 millis\")",
  open,
  backlog: docketBacklog,
  probe: (target) => sqliteProbe((target as Extract<Target, { store: "sqlite" }>).file, COUNT),
  startWorker
}
