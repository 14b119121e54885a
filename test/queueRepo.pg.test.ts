import { SqlClient, Statement } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option, Queue, Redacted, Schedule, Scope } from "effect"
import pg from "pg"
import * as Database from "../src/Database.js"
import { DirectPool } from "../src/internal/directPool.js"
import * as Complete from "../src/internal/sql/claimComplete.js"
import * as List from "../src/internal/sql/historyList.js"
import * as Prune from "../src/internal/sql/historyPrune.js"
import * as RetryDead from "../src/internal/sql/deadRetry.js"
import * as QueueRepo from "../src/QueueRepo.js"
import { ageFinished, countState, pgAvailable, pgBackend, pgSession, repoLayer } from "./support/db.js"
import { dbNow, expectAround, getItem, queueRepoConformance } from "./conformance/queueRepo.js"
import { withRepo } from "./conformance/harness.js"
import { recordingTracer } from "./support/tracing.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())

/** Separate connection pools (each a Database layer with its own QueueRepo) on one fresh database. */
const pools = (count: number) =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(() => backend.fresh())
    return yield* Effect.all(
      Array.from({ length: count }, () => Layer.build(repoLayer(url))),
      { concurrency: "unbounded" }
    )
  })

describe.skipIf(!pgAvailable)("QueueRepo on PostgreSQL", () => {
  queueRepoConformance(backend)

  describe("PostgreSQL only", () => {
    /** A repository and a raw session of its own on a fresh database; `untilLockWait` polls until a statement waits for a row lock. */
    const racing = Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const repo = Context.get(yield* Layer.build(repoLayer(url)), QueueRepo.QueueRepo)
      const session = yield* pgSession(url)
      // Its own connection: inside the session's open transaction pg_stat_activity would stay the snapshot of its first read.
      const observer = yield* pgSession(url)
      const query = (text: string, params: Array<unknown> = []) => Effect.promise(() => session.query(text, params))
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
    // and wakes nobody.
    it.live("the single enqueue's two branches: rows, dedupe and one notification per inserted item", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        yield* Layer.build(repoLayer(url)) // migrates
        const listener = yield* pgSession(url)
        const session = yield* pgSession(url)
        const heard: Array<string> = []
        listener.on("notification", (n) => heard.push(`${n.channel}:${n.payload}`))
        yield* Effect.promise(() => listener.query("LISTEN docket_items"))
        const enqueue = (key: string | null) =>
          Effect.promise(() =>
            session.query<{ new_id: string; new_kind: string; new_key: string | null }>(
              "SELECT * FROM docket_enqueue_one($1, $2, $3, 0, NULL, 0, NULL, NULL)",
              ["branch", "{\"n\":1}", key]
            )
          ).pipe(Effect.map((r) => r.rows.map((row) => [row.new_kind, row.new_key])))
        expect(yield* enqueue(null)).toEqual([["branch", null]])
        expect(yield* enqueue(null)).toEqual([["branch", null]])
        expect(yield* enqueue("k")).toEqual([["branch", "k"]])
        expect(yield* enqueue("k")).toEqual([])
        // A round trip on the listener after the last commit: every notification sent by then has arrived.
        yield* Effect.promise(() => listener.query("SELECT 1"))
        expect(heard).toEqual(["docket_items:enqueued", "docket_items:enqueued", "docket_items:enqueued"])
        const { rows } = yield* Effect.promise(() =>
          session.query<{ n: number }>("SELECT count(*)::int AS n FROM docket_items WHERE kind = 'branch' AND state = 'waiting'")
        )
        expect(rows[0].n).toBe(3)
      }).pipe(Effect.scoped))

    it.live("a cancel that waits for the lock of an item being completed says finished, not unknown", () =>
      Effect.gen(function*() {
        const { query, repo, untilLockWait } = yield* racing
        const { id } = yield* repo.enqueue("race", 1)
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })
        // The complete holds the row (moved to docket_done, not yet committed) while the cancel comes.
        yield* query("BEGIN")
        yield* query(Complete.pgKeep, [[id], [claim.token], null])
        const cancel = yield* Effect.fork(repo.cancel([id]))
        yield* untilLockWait
        yield* query("COMMIT")
        expect(yield* Fiber.join(cancel)).toEqual(["finished"])
        expect(Option.getOrThrow(yield* repo.get(id)).state).toBe("done")
      }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

    it.live("two dead retries at once retry an item once and count its death once", () =>
      Effect.gen(function*() {
        const { query, repo, untilLockWait } = yield* racing
        const { id } = yield* repo.enqueue("twice", 1)
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })
        expect(yield* repo.fail(claim, "boom", { _tag: "Dead" })).toBe("dead")
        yield* query("BEGIN")
        expect((yield* query(RetryDead.pg, [[id], null])).rows.map((r) => Number(r.id))).toEqual([id])
        const second = yield* Effect.fork(repo.retryDead({ ids: [id] }))
        yield* untilLockWait
        yield* query("COMMIT")
        expect(yield* Fiber.join(second)).toEqual([])
        expect((yield* repo.totals).filter((t) => t.what === "dead")).toEqual([{ kind: "twice", what: "dead", count: 1 }])
        expect(Option.getOrThrow(yield* repo.get(id)).state).toBe("waiting")
      }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

    it.live("a prune skips rows another session holds (never waits for them), takes them at a later pass, and walks the finished index", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const context = yield* Layer.build(repoLayer(url))
        const repo = Context.get(context, QueueRepo.QueueRepo)
        const sql = Context.get(context, SqlClient.SqlClient)
        yield* repo.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ kind: "old", payload: i })))
        yield* repo.completeMany(yield* repo.claim({ worker: "w", limit: 50, lease: 30_000 }))
        yield* ageFinished(172_800_000).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        // Another session (another pruner) holds ten of them.
        const locker = new pg.Client({ connectionString: url })
        yield* Effect.promise(() => locker.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => locker.end()))
        yield* Effect.promise(() => locker.query("BEGIN"))
        yield* Effect.promise(() => locker.query("SELECT id FROM docket_done ORDER BY id LIMIT 10 FOR UPDATE"))
        // Bounded well below a lock wait: the prune must not wait at all.
        expect(yield* repo.prune.pipe(Effect.timeout("5 seconds"))).toEqual({ done: 40, cancelled: 0, dead: 0 })
        yield* Effect.promise(() => locker.query("COMMIT"))
        expect(yield* repo.prune).toEqual({ done: 10, cancelled: 0, dead: 0 })
        // Its plan can walk each table's finished index in order, under the
        // batch's limit, with no sort (tables this small would be scanned, or
        // read by bitmap and sorted, instead: both are off for the EXPLAIN only).
        const explain = (text: string, params: ReadonlyArray<unknown> = []) =>
          sql.withTransaction(Effect.zipRight(
            sql.unsafe("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off"),
            sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params)
          )).pipe(Effect.map((rows) => rows.map((r) => r["QUERY PLAN"]).join("\n")))
        const plan = yield* explain(Prune.pgDone, [86_400_000, 1000])
        expect(plan).toMatch(/Index Scan using docket_done_finished/)
        expect(plan).toMatch(/Index Scan using docket_items_finished/)
        // The DELETE takes the rows the walk locked by their address: no join
        // of the batch to the table (where seqscan is allowed, as outside this
        // EXPLAIN, that join read all of a small table).
        expect(plan).toMatch(/Tid Scan on docket_done/)
        expect(plan).toMatch(/Tid Scan on docket_items/)
        expect(plan).not.toMatch(/Seq Scan|Hash Semi Join/)
        // (Its counts are sorted by kind, a few rows: the walk itself is not.)
        expect(plan).not.toMatch(/Sort Key: \w+\.finished_at/)
        // `list` of done items merges both tables' indexes walked backwards from the cursor's key, no sort either.
        const listPlan = yield* explain(List.pg.finished, ["done", null, 1e15, 1e15, 51])
        expect(listPlan).toMatch(/Merge Append/)
        expect(listPlan).toMatch(/Index Scan Backward using docket_done_finished/)
        expect(listPlan).toMatch(/Index Scan Backward using docket_items_finished/)
        expect(listPlan).not.toMatch(/Sort  /)
        // A listing of dead items leaves docket_done out (its CHECK says it holds done items only).
        const deadPlan = yield* explain(List.pg.finished, ["dead", null, 1e15, 1e15, 51])
        expect(deadPlan).toMatch(/docket_items_finished/)
        expect(deadPlan).not.toMatch(/docket_done/)
      }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

    // Every pool prunes; on PostgreSQL two pruners run at once for real.
    // Each row is deleted by exactly one of them and counted once: the
    // totals (docket_counts) say every item finished, none twice.
    it.live("pruners in three pools at once delete and count every expired row exactly once", () =>
      Effect.gen(function*() {
        const [a, b, c] = yield* pools(3)
        const repos = [a, b, c].map((context) => Context.get(context, QueueRepo.QueueRepo))
        const sql = Context.get(a, SqlClient.SqlClient)
        const total = 4_321
        yield* repos[0].enqueueMany(Array.from({ length: total }, (_, i) => ({ kind: i % 2 === 0 ? "even" : "odd", payload: i })))
        const claims = yield* repos[0].claim({ worker: "w", limit: total, lease: 60_000 })
        expect(claims).toHaveLength(total)
        yield* repos[0].completeMany(claims)
        yield* ageFinished(172_800_000).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        // Each pool prunes until a pass finds nothing; all three at once.
        const pruneAll = (repo: QueueRepo.Service) =>
          Effect.iterate({ deleted: 0, last: -1 }, {
            while: (s) => s.last !== 0,
            body: (s) => Effect.map(repo.prune, (r) => ({ deleted: s.deleted + r.done, last: r.done }))
          })
        const counts = yield* Effect.all(repos.map(pruneAll), { concurrency: "unbounded" })
        expect(counts.reduce((sum, r) => sum + r.deleted, 0)).toBe(total)
        expect(yield* countState("done").pipe(Effect.provideService(SqlClient.SqlClient, sql))).toBe(0)
        const totals = yield* sql.unsafe<{ kind: string; n: string }>(
          "SELECT kind, n FROM docket_counts WHERE what = 'done' ORDER BY kind"
        )
        expect(totals.map((r) => [r.kind, Number(r.n)])).toEqual([["even", Math.ceil(total / 2)], ["odd", Math.floor(total / 2)]])
      }).pipe(Effect.scoped, Effect.timeout("60 seconds")))

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
           WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%docket_claim(%'`
        ).pipe(Effect.map((rows) => rows.map((r) => Number(r.pid))))
        yield* repo.enqueueMany([1, 2, 3].map((payload) => ({ kind: "job", payload })))
        for (let i = 0; i < 3; i++) expect(yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })).toHaveLength(1)
        const [first, ...others] = yield* claimers
        expect(others).toEqual([])
        // The reserved connection dies (as in a database restart): one claim
        // fails as a StorageError, the next reserves a new connection.
        yield* sql.unsafe("SELECT pg_terminate_backend($1)", [first])
        // pg_terminate_backend only signals: wait (bounded) until the backend
        // has exited, so its socket is closed before the next claim is sent.
        // A claim sent while it is still exiting gets the FATAL as its answer
        // and returns the connection before pg sees the close, so one more
        // claim could fail (CI hit it once); the claimer retries either way.
        yield* sql.unsafe<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1", [first]).pipe(
          Effect.filterOrFail((rows) => rows[0].n === 0, () => "the terminated backend is still there"),
          Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds")))
        )
        yield* repo.enqueue("job", 4)
        const failed = yield* Effect.exit(repo.claim({ worker: "w", limit: 1, lease: 30_000 }))
        expect(Exit.isFailure(failed)).toBe(true)
        expect(yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })).toHaveLength(1)
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
        expect(seen.some((text) => text.includes("docket_enqueue_one("))).toBe(true)
        expect(seen.some((text) => text.includes("INSERT INTO docket_done"))).toBe(true)
        expect(made.filter((span) => span.name === "sql.execute").length).toBeGreaterThanOrEqual(seen.length)
        // An application's own PgClient (the schema is already there): every
        // statement goes through @effect/sql, and the queue works the same.
        seen.length = 0
        const appClient = PgClient.layer({ url: Redacted.make(url) })
        yield* Effect.scoped(Effect.flatMap(Layer.build(QueueRepo.layer().pipe(Layer.provideMerge(appClient))), (ctx) =>
          watched(Effect.provide(roundTrip, ctx))))
        expect(seen.some((text) => text.includes("docket_enqueue_one("))).toBe(true)
        expect(seen.some((text) => text.includes("INSERT INTO docket_done"))).toBe(true)
      }).pipe(Effect.timeout("20 seconds")))

    it.live("an interrupted enqueue is not sent while it waits for a connection, and is cancelled while it runs; a failed statement keeps its connection", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const ctx = yield* Layer.build(
          QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { maxConnections: 1 })))
        )
        const repo = Context.get(ctx, QueueRepo.QueueRepo)
        const sql = Context.get(ctx, SqlClient.SqlClient)
        const pool = Context.get(ctx as Context.Context<unknown>, DirectPool).pool as unknown as { readonly waitingCount: number }
        const count = Effect.map(sql.unsafe<{ n: string }>("SELECT count(*)::text AS n FROM docket_items"), (r) => Number(r[0].n))
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
        yield* Effect.promise(() => locker.query("BEGIN; LOCK TABLE docket_items IN ACCESS EXCLUSIVE MODE"))
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
        yield* sql.unsafe("ALTER TABLE docket_items RENAME TO docket_items_away")
        const refused = yield* Effect.flip(repo.enqueue("job", 3))
        expect(refused._tag).toBe("StorageError")
        expect(yield* session).toBe(before)
        yield* sql.unsafe("ALTER TABLE docket_items_away RENAME TO docket_items")
        expect((yield* repo.enqueue("job", 4))._tag).toBe("Enqueued")
        expect(yield* count).toBe(1)
      }).pipe(Effect.scoped, Effect.timeout("20 seconds")))

    it.live("concurrent enqueues of one key from three pools insert exactly one waiting item", () =>
      Effect.scoped(Effect.gen(function*() {
        const contexts = yield* pools(3)
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
        const contexts = yield* pools(2)
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

    it.live("concurrent claimers on separate pools never share an item (1,000 items)", () =>
      Effect.scoped(Effect.gen(function*() {
        const contexts = yield* pools(2)
        const [a, b] = contexts.map((context) => Context.get(context, QueueRepo.QueueRepo))
        for (let batch = 0; batch < 4; batch++) {
          yield* a.enqueueMany(
            Array.from({ length: 250 }, (_, i) => ({ kind: "job", payload: batch * 250 + i, priority: i % 3 }))
          )
        }
        const drain = (repo: QueueRepo.Service, worker: string) =>
          Effect.gen(function*() {
            const ids: Array<number> = []
            for (;;) {
              const claims = yield* repo.claim({ worker, limit: 25, lease: "5 minutes" })
              if (claims.length === 0) return { worker, ids }
              for (const claim of claims) {
                expect(claim.worker).toBe(worker)
                expect(claim.attempt).toBe(1)
              }
              ids.push(...claims.map((c) => c.id))
            }
          })
        // Two claimers on each pool, all at once.
        const drained = yield* Effect.all(
          [drain(a, "a1"), drain(b, "b1"), drain(a, "a2"), drain(b, "b2")],
          { concurrency: "unbounded" }
        )
        const all = drained.flatMap((d) => d.ids)
        expect(all).toHaveLength(1_000)
        expect(new Set(all).size).toBe(1_000)
        // The stored claimant of every item is the claimer that got it.
        const rows = yield* Effect.provide(
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql.unsafe<{ id: string; claimed_by: string; attempts: number }>(
              "SELECT id, claimed_by, attempts FROM docket_items WHERE state = 'running'"
            )),
          contexts[0]
        )
        expect(rows).toHaveLength(1_000)
        const owner = new Map(drained.flatMap((d) => d.ids.map((id) => [id, d.worker] as const)))
        for (const row of rows) {
          expect(row.claimed_by).toBe(owner.get(Number(row.id)))
          expect(Number(row.attempts)).toBe(1)
        }
      })), 120_000)

    it.live("leases and due times come from the database's clock", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        yield* repo.enqueue("job", {})
        const before = yield* dbNow
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute" })
        const after = yield* dbNow
        expectAround(claim.leaseUntil, before + 60_000, after + 60_000, 50)
      })))

    it.live("a worker clock skewed from the database's cannot matter: the database's clock decides", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const sql = yield* SqlClient.SqlClient
        // The database's clock runs an hour ahead of this process's clock.
        const skew = 3_600_000
        yield* sql.unsafe(`CREATE OR REPLACE FUNCTION docket_now_ms() RETURNS bigint
          LANGUAGE sql STABLE PARALLEL SAFE
          AS 'SELECT (extract(epoch FROM statement_timestamp()) * 1000)::bigint + ${skew}'`)
        const db = yield* dbNow
        expectAround(db, Date.now() + skew, Date.now() + skew, 5_000)

        // Due in 30 minutes by this process's clock, but already due by the database's.
        const early = yield* repo.enqueue("job", "early", { runAt: Date.now() + 1_800_000 })
        // A delay counts from the database's now.
        const t0 = yield* dbNow
        const delayed = yield* repo.enqueue("job", "delayed", { delay: "1 minute" })
        const t1 = yield* dbNow
        expectAround((yield* getItem(delayed.id)).runAt, t0 + 60_000, t1 + 60_000, 50)
        expect(yield* repo.stats).toMatchObject({ due: 1, scheduled: 1 })

        const before = yield* dbNow
        const claims = yield* repo.claim({ worker: "w", limit: 10, lease: "1 minute" })
        const after = yield* dbNow
        expect(claims.map((c) => c.id)).toEqual([early.id])
        expectAround(claims[0].leaseUntil, before + 60_000, after + 60_000, 50)
        expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 1, running: 1 })

        // Extend and a retry's backoff count from the database's now too.
        const e0 = yield* dbNow
        expect(yield* repo.extend(claims[0], "2 minutes")).toBe(true)
        const e1 = yield* dbNow
        expectAround((yield* getItem(early.id)).leaseUntil!, e0 + 120_000, e1 + 120_000, 50)
        const f0 = yield* dbNow
        expect(yield* repo.fail(claims[0], "x", { _tag: "Retry", delay: "3 minutes" })).toBe("retried")
        const f1 = yield* dbNow
        expectAround((yield* getItem(early.id)).runAt, f0 + 180_000, f1 + 180_000, 50)
      })))

    it.live("a cancel of running items notifies at commit, the ids in notices of at most 300; a rolled-back cancel sends none", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const ctx = yield* Layer.build(repoLayer(url))
        const repo = Context.get(ctx, QueueRepo.QueueRepo)
        const sql = Context.get(ctx, SqlClient.SqlClient)
        const notices = yield* Queue.unbounded<string>()
        const listener = new pg.Client({ connectionString: url })
        yield* Effect.promise(() => listener.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => listener.end()))
        listener.on("notification", (m) => {
          if (m.channel === "docket_cancel") Queue.unsafeOffer(notices, m.payload ?? "")
        })
        yield* Effect.promise(() => listener.query("LISTEN docket_cancel"))
        const take = Queue.take(notices).pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "no notice" }))
        yield* repo.enqueueMany(Array.from({ length: 650 }, (_, i) => ({ kind: "job", payload: i })))
        const claims = yield* repo.claim({ worker: "w", limit: 650, lease: 30_000 })
        const ids = claims.map((c) => c.id)
        const waiting = yield* repo.enqueue("job", "waiting")
        // Rolled back: nothing is sent (the next notice is the committed cancel's).
        yield* Effect.either(sql.withTransaction(Effect.zipRight(repo.cancel([ids[0]]), Effect.fail("undo"))))
        expect(yield* repo.cancel([ids[1], waiting.id])).toEqual(["cancelledRunning", "cancelled"])
        expect(yield* take).toBe(String(ids[1]))
        // Many at once: notices of at most 300 ids (a payload stays under 8000 bytes).
        const rest = ids.filter((id) => id !== ids[1])
        const outcomes = yield* repo.cancel(rest)
        expect(new Set(outcomes)).toEqual(new Set(["cancelledRunning"]))
        const got: Array<string> = [yield* take, yield* take, yield* take]
        const sizes = got.map((p) => p.split(",").length).sort((a, b) => b - a)
        expect(sizes).toEqual([300, 300, 49])
        expect(got.flatMap((p) => p.split(",").map(Number)).sort((a, b) => a - b)).toEqual(rest)
        // Only running items are announced: cancelling waiting ones sends nothing.
        const more = yield* repo.enqueue("job", "more")
        expect(yield* repo.cancel([more.id])).toEqual(["cancelled"])
        yield* repo.enqueue("job", "last")
        const [last] = yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })
        expect(yield* repo.cancel([last.id])).toEqual(["cancelledRunning"])
        expect(yield* take).toBe(String(last.id))
      }).pipe(Effect.scoped, Effect.timeout("30 seconds")))
  })
})
