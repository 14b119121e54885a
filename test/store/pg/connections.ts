/**
 * PostgreSQL only: the reserved claim connection, Docket's own client and its pool, interrupted statements.
 * Registered by test/store/pg.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { SqlClient, Statement } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Redacted, Schedule, Scope } from "effect"
import pg from "pg"
import * as Database from "../../../src/Database.js"
import { DirectPool } from "../../../src/internal/directPool.js"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { asAdmin, databaseLayer, repoLayer, schemaOf, unsafe } from "../../support/db.js"
import { recordingTracer } from "../../support/tracing.js"
import type { Backend } from "../../support/db.js"

/** Registers these tests for the PostgreSQL backend. */
export const pgConnectionsTests = (backend: Backend) => {
  it.live("claims hold one reserved connection, replaced after it is killed and released with the layer", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const scope = yield* Scope.make()
      // Closed below; closed too if an assertion fails first.
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      const context = yield* Layer.buildWithScope(repoLayer(url), scope)
      const repo = Context.get(context, QueueRepo.QueueRepo)
      const sql = Context.get(context, SqlClient.SqlClient)
      // Other sessions of this database whose last statement was a claim.
      const claimers = sql.unsafe<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%docket_claim_next(%'`
      ).pipe(Effect.map((rows) => rows.map((r) => Number(r.pid))))
      yield* repo.enqueueMany([1, 2, 3].map((payload) => ({ kind: "job", payload })))
      for (let i = 0; i < 3; i++) expect(yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })).toHaveLength(1)
      const [first, ...others] = yield* claimers
      expect(others).toEqual([])
      // The reserved connection dies (as in a database restart, or a server
      // that ends idle sessions): the next claim is sent on a new connection.
      yield* sql.unsafe("SELECT pg_terminate_backend($1)", [first])
      // pg_terminate_backend only signals: wait (bounded) until the backend
      // has exited, so its socket is closed before the next claim is sent.
      yield* sql.unsafe<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1", [first]).pipe(
        Effect.filterOrFail((rows) => rows[0].n === 0, () => "the terminated backend is still there"),
        Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds")))
      )
      yield* repo.enqueue("job", 4)
      // A claim sent while the backend is still exiting gets the FATAL as its
      // answer (it was sent: it is not sent again) and fails as a
      // StorageError; the next one is sent on a new connection (CI hit it once).
      const next = yield* Effect.exit(repo.claim({ worker: "w", limit: 1, lease: 30_000 }))
      if (Exit.isFailure(next)) {
        expect(String(next.cause)).toMatch(/terminating connection/)
        expect(yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })).toHaveLength(1)
      } else {
        expect(next.value).toHaveLength(1)
      }
      const after = yield* claimers
      expect(after).toHaveLength(1)
      expect(after[0]).not.toBe(first)
      // Closing the layer releases it and ends the pool (a held connection would keep it open).
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.scoped, Effect.timeout("20 seconds")))

  it.live("Docket's own client sends statements straight to its pool unless a tracer reads their spans; an application's PgClient goes through @effect/sql", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      // A statement transformer sees every statement that goes through @effect/sql.
      const seen: Array<string> = []
      const watched = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Statement.withTransformer(effect, (statement) => {
          seen.push(statement.compile()[0])
          return Effect.succeed(statement)
        })
      const roundTrip = Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const added = yield* repo.enqueue("job", { n: 1 })
        const batch = yield* repo.enqueueMany([{ kind: "job", payload: 2 }, { kind: "job", payload: 3 }])
        const claims = yield* repo.claim({ worker: "w", limit: 3, lease: 30_000 })
        expect(claims.map((c) => c.id)).toEqual([added.id, ...batch.map((b) => b.id)])
        expect(yield* repo.completeMany(claims)).toEqual([true, true, true])
      })
      // Docket's Database layer, built-in tracer: nothing through @effect/sql
      // (the claim runs on its reserved connection either way).
      yield* Effect.scoped(Effect.flatMap(Layer.build(repoLayer(url)), (ctx) =>
        watched(Effect.provide(roundTrip, ctx))))
      expect(seen).toEqual([])
      // The same under an application's tracer: each statement keeps its sql.execute span.
      const { made, tracer } = recordingTracer()
      yield* Effect.scoped(Effect.flatMap(Layer.build(repoLayer(url)), (ctx) =>
        watched(Effect.provide(roundTrip, ctx)).pipe(Effect.withTracer(tracer))))
      // (Qualified by the schema outside public: "docket_test".docket_done.)
      const insertsDone = (text: string) => /INSERT INTO ("\w+"\.)?docket_done/.test(text)
      expect(seen.some((text) => text.includes("docket_enqueue_one("))).toBe(true)
      expect(seen.some(insertsDone)).toBe(true)
      expect(made.filter((span) => span.name === "sql.execute").length).toBeGreaterThanOrEqual(seen.length)
      // An application's own PgClient (the schema is already there): every
      // statement goes through @effect/sql, and the queue works the same.
      seen.length = 0
      // (Its schema given beside it: Database.schemaLayer.)
      const appClient = Layer.merge(PgClient.layer({ url: Redacted.make(url) }), Database.schemaLayer(schemaOf(url).name))
      yield* Effect.scoped(Effect.flatMap(Layer.build(QueueRepo.layer().pipe(Layer.provideMerge(appClient))), (ctx) =>
        watched(Effect.provide(roundTrip, ctx))))
      expect(seen.some((text) => text.includes("docket_enqueue_one("))).toBe(true)
      expect(seen.some(insertsDone)).toBe(true)
    }).pipe(Effect.timeout("20 seconds")))

  it.live("an interrupted enqueue is not sent while it waits for a connection, and is cancelled while it runs; a failed statement keeps its connection", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const ctx = yield* Layer.build(
        QueueRepo.layer().pipe(Layer.provideMerge(databaseLayer(url, { maxConnections: 1 })))
      )
      const repo = Context.get(ctx, QueueRepo.QueueRepo)
      const sql = Context.get(ctx, SqlClient.SqlClient)
      const pool = Context.get(ctx as Context.Context<unknown>, DirectPool).pool as unknown as { readonly waitingCount: number }
      const count = Effect.map(
        Effect.provide(unsafe<{ n: string }>("SELECT count(*)::text AS n FROM docket_items"), ctx),
        (r) => Number(r[0].n)
      )
      const until = <A>(read: Effect.Effect<A>, done: (a: A) => boolean) =>
        read.pipe(Effect.repeat({ until: done, schedule: Schedule.spaced("5 millis") }), Effect.timeout("5 seconds"))
      // Waiting for the pool's one connection (a transaction holds it): interrupted, never sent.
      const inside = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(sql.withTransaction(Effect.zipRight(Deferred.succeed(inside, undefined), Deferred.await(gate))))
      yield* Deferred.await(inside)
      const queued = yield* Effect.fork(repo.enqueue("job", 1))
      yield* until(Effect.sync(() => pool.waitingCount), (n) => n === 1)
      yield* Fiber.interrupt(queued)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      expect(yield* count).toBe(0)
      // Running, blocked on a lock another session holds: interrupted and
      // cancelled (left running, the insert would commit once the lock goes).
      // The pool's one connection is busy, so the cancel must not need it.
      // (The watcher reads pg_stat_activity outside any transaction: inside
      // one, PostgreSQL keeps the first snapshot of it.)
      const [locker, watcher] = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })]
      for (const client of [locker, watcher]) {
        yield* Effect.promise(() => client.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => client.end()))
      }
      yield* Effect.promise(() => locker.query(schemaOf(url).qualify("BEGIN; LOCK TABLE docket_items IN ACCESS EXCLUSIVE MODE")))
      const blocked = yield* Effect.fork(repo.enqueue("job", 2))
      const lockWaiters = Effect.promise(() =>
        watcher.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%docket_enqueue_one(%'`
        )
      ).pipe(Effect.map((r) => Number(r.rows[0].n)))
      yield* until(lockWaiters, (n) => n === 1)
      yield* Fiber.interrupt(blocked)
      expect(yield* lockWaiters).toBe(0)
      yield* Effect.promise(() => locker.query("COMMIT"))
      expect(yield* count).toBe(0)
      // A statement the server refuses: a typed error, and the connection
      // stays in the pool (the same session serves the next statement).
      const session = Effect.map(sql.unsafe<{ pid: number }>("SELECT pg_backend_pid() AS pid"), (r) => r[0].pid)
      const before = yield* session
      yield* Effect.provide(asAdmin("ALTER TABLE docket_items RENAME TO docket_items_away"), ctx)
      const refused = yield* Effect.flip(repo.enqueue("job", 3))
      expect(refused._tag).toBe("StorageError")
      expect(yield* session).toBe(before)
      yield* Effect.provide(asAdmin("ALTER TABLE docket_items_away RENAME TO docket_items"), ctx)
      expect((yield* repo.enqueue("job", 4))._tag).toBe("Enqueued")
      expect(yield* count).toBe(1)
    }).pipe(Effect.scoped, Effect.timeout("20 seconds")))
}
