/**
 * PostgreSQL helpers of the store tests: separate pools on one fresh database,
 * and a session racing a repository for a row lock.
 */
import { Context, Effect, Layer } from "effect"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, pgSession, repoLayer, schemaOf } from "./db.js"

/** Separate connection pools (each a Database layer with its own QueueRepo) on one fresh database. */
export const pools = (backend: Backend, count: number) =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(() => backend.fresh())
    return yield* Effect.all(
      Array.from({ length: count }, () => Layer.build(repoLayer(url))),
      { concurrency: "unbounded" }
    )
  })

/** A repository and a raw session of its own on a fresh database; `untilLockWait` polls until a statement waits for a row lock. */
export const racing = (backend: Backend) => Effect.gen(function*() {
  const url = yield* Effect.promise(() => backend.fresh())
  const repo = Context.get(yield* Layer.build(repoLayer(url)), QueueRepo.QueueRepo)
  const session = yield* pgSession(url)
  // Its own connection: inside the session's open transaction pg_stat_activity would stay the snapshot of its first read.
  const observer = yield* pgSession(url)
  const qualify = schemaOf(url).qualify
  const query = (text: string, params: Array<unknown> = []) => Effect.promise(() => session.query(qualify(text), params))
  const untilLockWait = Effect.promise(async () => {
    const deadline = Date.now() + 10_000
    for (;;) {
      const { rows } = await observer.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
      )
      if (rows[0].n > 0) return
      if (Date.now() > deadline) throw new Error("no statement waited for a lock within 10 s")
      await new Promise((r) => setTimeout(r, 10))
    }
  })
  return { repo, query, untilLockWait }
})

// Migration 0014: a single enqueue without a key inserts without ON
// CONFLICT; with a key it dedupes as before. Both branches return the new
// row and send one NOTIFY for it; a deduplicated enqueue returns nothing
