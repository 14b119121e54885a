/**
 * Effect's own `PersistedQueue` (@effect/experimental) with the
 * `SqlPersistedQueue` store (@effect/sql), on PostgreSQL and on SQLite, with
 * their defaults (1 s poll, 2 min lock, immediate retries, 10 attempts).
 * It has no bulk API: "bulk" is `offer` 1,000 at a time inside one
 * transaction (its fastest path); one by one is `offer`. The worker is
 * `concurrency` fibers each looping on `take`. Retries (W4): immediate (it has
 * no backoff).
 */
import * as PersistedQueue from "@effect/experimental/PersistedQueue"
import { SqlClient } from "@effect/sql"
import * as SqlPersistedQueue from "@effect/sql/SqlPersistedQueue"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Fiber, Layer, Logger, LogLevel, ManagedRuntime, Redacted, Schema } from "effect"
import { pgProbe, sqliteProbe } from "./probes.js"
import type { Client, Contender, JobHandler, Payload, RunningWorker, Target, WorkerOptions } from "./types.js"
import { batches } from "./types.js"

const BenchPayload = Schema.Struct({ i: Schema.Number, t: Schema.Number })

const sqlLayer = (target: Target): Layer.Layer<SqlClient.SqlClient, unknown> => {
  if (target.store === "pg") return PgClient.layer({ url: Redacted.make(target.url) })
  if (target.store === "sqlite") return SqliteClient.layer({ filename: target.file })
  throw new Error("SqlPersistedQueue runs on SQL")
}

const runtimeFor = (target: Target) =>
  ManagedRuntime.make(
    PersistedQueue.layer.pipe(
      Layer.provideMerge(SqlPersistedQueue.layerStore()),
      Layer.provideMerge(sqlLayer(target)),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )

const queue = PersistedQueue.make({ name: "bench", schema: BenchPayload })

const open = async (target: Target): Promise<Client> => {
  const runtime = runtimeFor(target)
  const q = await runtime.runPromise(queue)
  return {
    enqueueBulk: async (payloads) => {
      for (const batch of batches(payloads, 1000)) {
        await runtime.runPromise(
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql.withTransaction(Effect.forEach(batch, (p) => q.offer(p), { discard: true })))
        )
      }
    },
    enqueueOne: async (payload) => {
      await runtime.runPromise(q.offer(payload))
    },
    close: () => runtime.dispose()
  }
}

const toEffect = (handler: JobHandler) => (payload: Payload): Effect.Effect<void, unknown> =>
  Effect.suspend(() => {
    try {
      const result = handler(payload)
      if (result !== undefined && typeof (result as Promise<void>).then === "function") {
        return Effect.tryPromise({ try: () => result as Promise<void>, catch: (e) => e })
      }
      return Effect.void
    } catch (e) {
      return Effect.fail(e)
    }
  })

const startWorker = async (target: Target, handler: JobHandler, options: WorkerOptions): Promise<RunningWorker> => {
  const runtime = runtimeFor(target)
  const q = await runtime.runPromise(queue)
  const run = toEffect(handler)
  const loop = Effect.forever(Effect.ignore(q.take((payload) => run(payload))))
  const fibers = await runtime.runPromise(
    Effect.forEach(Array.from({ length: options.concurrency }), () => Effect.forkDaemon(loop))
  )
  return {
    stop: async () => {
      await runtime.runPromise(Fiber.interruptAll(fibers))
      await runtime.dispose()
    }
  }
}

const COUNT = "select count(*) as n from effect_queue where completed = false"

export const effectPqPg: Contender = {
  name: "effect-pq-pg",
  label: "Effect PersistedQueue (PostgreSQL)",
  store: "pg",
  config: "SqlPersistedQueue.layerStore() defaults (1 s poll); bulk = offer x 1,000 per transaction",
  retryNote: "immediate (no backoff exists)",
  open: (target) => open(target),
  probe: (target) => pgProbe((target as Extract<Target, { store: "pg" }>).url, COUNT),
  startWorker
}

export const effectPqSqlite: Contender = {
  name: "effect-pq-sqlite",
  label: "Effect PersistedQueue (SQLite)",
  store: "sqlite",
  config: "SqlPersistedQueue.layerStore() defaults on a temp file (WAL); bulk = offer x 1,000 per transaction",
  retryNote: "immediate (no backoff exists)",
  open: (target) => open(target),
  probe: (target) => sqliteProbe((target as Extract<Target, { store: "sqlite" }>).file, COUNT),
  startWorker
}
