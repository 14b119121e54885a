/**
 * For the worker parts' own tests: a real QueueRepo on a fresh SQLite file,
 * claims made through it, and runs as the pool tracks them.
 */
import { SqlClient } from "@effect/sql"
import { type Duration, Effect, Layer, Logger, type Scope } from "effect"
import type { Claim } from "../../src/Domain.js"
import * as Events from "../../src/internal/worker/events.js"
import { PoolState, type Running, type Slot } from "../../src/internal/worker/state.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import * as Wakeups from "../../src/Wakeups.js"
import { repoLayer, sqliteBackend } from "./db.js"

const backend = sqliteBackend()
export const cleanup = () => backend.cleanup()

/** The repository, its wake-ups and the SqlClient over a fresh SQLite file, for the scope. */
export const freshRepo: Effect.Effect<
  { readonly repo: QueueRepo.Service; readonly sql: SqlClient.SqlClient; readonly wakeups: Wakeups.Service },
  unknown,
  Scope.Scope
> = Effect.gen(function*() {
  const url = yield* Effect.promise(() => backend.fresh())
  const context = yield* Layer.build(repoLayer(url))
  return Effect.runSync(
    Effect.all({ repo: QueueRepo.QueueRepo, sql: SqlClient.SqlClient, wakeups: Wakeups.Wakeups }).pipe(
      Effect.provide(context)
    )
  )
})

/** Enqueues `n` items of kind "job" and claims them all for `worker`. */
export const claimed = (repo: QueueRepo.Service, n: number, worker = "w1", lease: Duration.DurationInput = "1 minute") =>
  Effect.gen(function*() {
    yield* repo.enqueueMany(Array.from({ length: n }, (_, i) => ({ kind: "job", payload: i })))
    return yield* repo.claim({ worker, limit: n, lease })
  })

/** A run of `claim` in a slot of its own, as the pool tracks it. */
export const runOf = (claim: Claim, deadline: number): Running => {
  const slot: Slot = { fiber: undefined, current: undefined, controller: undefined }
  const entry: Running = { claim, slot, deadline, lost: false, cancelled: undefined }
  slot.current = entry
  return entry
}

/** A row of the queue table, as stored. */
export const row = (sql: SqlClient.SqlClient, id: number) =>
  Effect.map(
    sql.unsafe<{ state: string; lease_until: number | null; lease_seq: number; claimed_by: string | null }>(
      "SELECT state, lease_until, lease_seq, claimed_by FROM docket_items WHERE id = ?",
      [id]
    ),
    (rows) => rows[0]
  )

/** Rows in the queue table (in one state, if given). */
export const countRows = (sql: SqlClient.SqlClient, state?: string) =>
  Effect.map(
    state === undefined
      ? sql.unsafe<{ n: number }>("SELECT count(*) AS n FROM docket_items")
      : sql.unsafe<{ n: number }>("SELECT count(*) AS n FROM docket_items WHERE state = ?", [state]),
    (rows) => Number(rows[0].n)
  )

/** The events part (a pool's publisher); its `Stopped` carries the counters of `state`. */
export const makePublisher = (state: PoolState = new PoolState(new Map())) => Events.make({ counters: () => state.counters() })

/** Runs `effect` with the lines it logs at `level` or above ("WARN: docket: ...") captured in `lines`. */
export const withLogLines = <A, E, R>(
  effect: (lines: Array<string>) => Effect.Effect<A, E, R>,
  level: "Info" | "Warning" = "Warning"
) => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    if (logLevel.ordinal < (level === "Info" ? 20000 : 30000)) return
    const parts = Array.isArray(message) ? message : [message]
    lines.push(`${logLevel.label}: ${parts.join(" ")}`)
  })
  return effect(lines).pipe(Effect.provide(Logger.add(logger)))
}

/** Reads until `done` holds, waiting 10 ms of real time between reads (a TestClock does not move), at most 10 s. */
export const until = <A, E>(read: Effect.Effect<A, E>, done: (a: A) => boolean, what = "the condition") =>
  Effect.gen(function*() {
    const deadline = Date.now() + 10_000
    for (;;) {
      const value = yield* read
      if (done(value)) return value
      if (Date.now() > deadline) throw new Error(`${what} not met within 10 s (last read: ${JSON.stringify(value)})`)
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
    }
  })
