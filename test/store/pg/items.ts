/**
 * PostgreSQL only: enqueue's two branches in the function, keyed enqueues racing across pools and transactions.
 * Registered by test/store/pg.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Layer, Schedule } from "effect"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { countState, pgSession, repoLayer, schemaOf } from "../../support/db.js"
import { getItem } from "../../support/store.js"
import { pools } from "../../support/pg.js"
import type { Backend } from "../../support/db.js"

/** Registers these tests for the PostgreSQL backend. */
export const pgItemsTests = (backend: Backend) => {
  // Migration 0014: a single enqueue without a key inserts without ON
  // CONFLICT; with a key it dedupes as before. Both branches return the new
  // row and send one NOTIFY for it; a deduplicated enqueue returns nothing
  // and wakes nobody. Since 0016 on the channel it is given (the schema's).
  it.live("the single enqueue's two branches: rows, dedupe and one notification per inserted item", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      yield* Layer.build(repoLayer(url)) // migrates
      const listener = yield* pgSession(url)
      const session = yield* pgSession(url)
      const schema = schemaOf(url)
      const heard: Array<string> = []
      listener.on("notification", (n) => heard.push(`${n.channel}:${n.payload}`))
      yield* Effect.promise(() => listener.query(`LISTEN ${listener.escapeIdentifier(schema.itemsChannel)}`))
      const enqueue = (key: string | null) =>
        Effect.promise(() =>
          session.query<{ new_id: string; new_kind: string; new_key: string | null }>(
            schema.qualify("SELECT * FROM docket_enqueue_one($1, $2, $3, 0, NULL, 0, NULL, NULL, $4)"),
            ["branch", "{\"n\":1}", key, schema.itemsChannel]
          )
        ).pipe(Effect.map((r) => r.rows.map((row) => [row.new_kind, row.new_key])))
      expect(yield* enqueue(null)).toEqual([["branch", null]])
      expect(yield* enqueue(null)).toEqual([["branch", null]])
      expect(yield* enqueue("k")).toEqual([["branch", "k"]])
      expect(yield* enqueue("k")).toEqual([])
      // A round trip on the listener after the last commit: every notification sent by then has arrived.
      yield* Effect.promise(() => listener.query("SELECT 1"))
      expect(heard).toEqual(Array.from({ length: 3 }, () => `${schema.itemsChannel}:enqueued`))
      const { rows } = yield* Effect.promise(() =>
        session.query<{ n: number }>(
          schema.qualify("SELECT count(*)::int AS n FROM docket_items WHERE kind = 'branch' AND state = 'waiting'")
        )
      )
      expect(rows[0].n).toBe(3)
    }).pipe(Effect.scoped))

  it.live("concurrent enqueues of one key from three pools insert exactly one waiting item", () =>
    Effect.scoped(Effect.gen(function*() {
      const contexts = yield* pools(backend, 3)
      const repos = contexts.map((context) => Context.get(context, QueueRepo.QueueRepo))
      for (const key of ["repo-1", "repo-2", "repo-3"]) {
        const results = yield* Effect.all(
          Array.from({ length: 50 }, (_, i) =>
            i % 5 === 4
              ? Effect.map(
                repos[i % 3].enqueueMany([{ kind: "mirror.refresh", payload: { i }, key }]),
                (r) => r[0]
              )
              : repos[i % 3].enqueue("mirror.refresh", { i }, { key })),
          { concurrency: "unbounded" }
        )
        const enqueued = results.filter((r) => r._tag === "Enqueued")
        expect(enqueued).toHaveLength(1)
        expect(new Set(results.map((r) => r.id))).toEqual(new Set([enqueued[0].id]))
      }
      expect(yield* Effect.provide(countState("waiting"), contexts[0])).toBe(3)
    })))

  it.live("a keyed enqueue in an open transaction holds its key: commit -> Deduplicated, rollback -> Enqueued", () =>
    Effect.scoped(Effect.gen(function*() {
      const contexts = yield* pools(backend, 2)
      const [a, b] = contexts.map((context) => Context.get(context, QueueRepo.QueueRepo))
      const sqlA = Context.get(contexts[0], SqlClient.SqlClient)
      // Sessions of this database waiting on a lock (the second enqueue, blocked by the open transaction).
      const blocked = sqlA.unsafe<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%docket%'`
      ).pipe(Effect.map((rows) => Number(rows[0].n)))
      for (const outcome of ["commit", "rollback"] as const) {
        const key = `k-${outcome}`
        const enqueued = yield* Deferred.make<QueueRepo.EnqueueResult>()
        const finish = yield* Deferred.make<void>()
        const tx = yield* Effect.fork(sqlA.withTransaction(Effect.gen(function*() {
          const result = yield* a.enqueue("job", "in transaction", { key })
          yield* Deferred.succeed(enqueued, result)
          yield* Deferred.await(finish)
          if (outcome === "rollback") return yield* Effect.fail("rolled back" as const)
          return result
        })))
        const inTx = yield* Deferred.await(enqueued)
        expect(inTx._tag).toBe("Enqueued")
        const other = yield* Effect.fork(b.enqueue("job", "outside", { key }))
        // Wait for the condition (the outside enqueue blocked on the key), not for time.
        yield* blocked.pipe(Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: (n) => n > 0 }))
        yield* Deferred.succeed(finish, undefined)
        const txExit = yield* Effect.exit(tx.await.pipe(Effect.flatten))
        const result = yield* other.await.pipe(Effect.flatten)
        if (outcome === "commit") {
          expect(Exit.isSuccess(txExit)).toBe(true)
          expect(result).toEqual({ _tag: "Deduplicated", id: inTx.id })
          expect(yield* Effect.provide(getItem(inTx.id), contexts[1])).toMatchObject({ payload: "in transaction" })
        } else {
          expect(Exit.isFailure(txExit)).toBe(true)
          expect(result._tag).toBe("Enqueued")
          expect(yield* Effect.provide(getItem(result.id), contexts[1])).toMatchObject({ payload: "outside", key })
        }
      }
      expect(yield* Effect.provide(countState("waiting"), contexts[0])).toBe(2)
    })))
}
