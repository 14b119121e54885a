/**
 * Docket behind PgBouncer (docs/scaling.md, "PgBouncer"), each promise there a
 * test: real PgBouncer processes of this file's own (test/support/pgbouncer.ts)
 * in transaction and in session pooling, in front of the test server, each
 * test on a fresh database reached through them.
 *
 * Transaction pooling: migrations, enqueues (in the application's own
 * transaction too), claims, completes, cancels, interrupted statements,
 * recurring ticks and the dashboard's API all work through it; LISTEN does
 * not, so a pool given `listenDatabase` (a direct URL) is woken by
 * notifications sent through the pooler, and a pool without it warns once
 * and polls. Session pooling: LISTEN works as on a direct connection, and
 * as a transaction pool's `listenDatabase`. The crash suite's kill scenario
 * through the pooler is in test/reliability/pooled.ts.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Deferred, Duration, Effect, Fiber, Layer, Option, Schedule, Schema } from "effect"
import pg from "pg"
import * as Database from "../src/Database.js"
import * as Docket from "../src/Docket.js"
import type { Event } from "../src/Events.js"
import * as Handler from "../src/Handler.js"
import * as Migrations from "../src/Migrations.js"
import * as QueueRepo from "../src/QueueRepo.js"
import * as Recurring from "../src/Recurring.js"
import * as Worker from "../src/Worker.js"
import { postJson, serve } from "./support/dashboard.js"
import { pgAvailable, pgBackend, repoLayer } from "./support/db.js"
import { waitForEvent } from "./support/events.js"
import { type PgBouncer, pgbouncerAvailable, startPgBouncer } from "./support/pgbouncer.js"
import { withLogLines } from "./support/worker.js"

const backend = pgBackend()
let transaction: PgBouncer
let session: PgBouncer
beforeAll(async () => {
  if (!pgAvailable || !pgbouncerAvailable) return
  ;[transaction, session] = await Promise.all([startPgBouncer("transaction"), startPgBouncer("session")])
})
afterAll(async () => {
  await Promise.all([transaction?.stop(), session?.stop()])
  await backend.cleanup()
})

/** A fresh database: its direct URL and its URL through `pooler`. */
const fresh = (pooler: () => PgBouncer) =>
  Effect.promise(async () => {
    const direct = await backend.fresh()
    return { direct, pooled: pooler().through(direct) }
  })

/** The queue over `url` with `options`, and a pool of `handlers` on it. */
const poolOn = (url: string, options: Worker.Options, databaseOptions: Database.Options = {}) =>
  Worker.layer(options).pipe(
    Layer.provideMerge(QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, databaseOptions))))
  )

/** Runs `effect` on a queue of its own over `url`: another process's enqueue or cancel (its own pool, its NOTIFY). */
const elsewhere = <A, E>(url: string, effect: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>) =>
  Effect.scoped(Effect.provide(effect, repoLayer(url)))

/** Waits (bounded) until `n` sessions of the database at `direct` listen on Docket's channel. */
const listening = (direct: string, n: number) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: direct })
    await client.connect()
    try {
      const deadline = Date.now() + 20_000
      for (;;) {
        const { rows } = await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND state = 'idle' AND query LIKE '%LISTEN "docket_items"%'`
        )
        if (rows[0].n >= n) return
        if (Date.now() > deadline) throw new Error(`fewer than ${n} sessions listen after 20 s`)
        await new Promise((r) => setTimeout(r, 25))
      }
    } finally {
      await client.end()
    }
  })

const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })

/**
 * Waits (bounded) until a warning about the LISTEN connection was logged and
 * no LISTEN connection is left on the transaction pooler: every pool's probe
 * is over (a pool whose probe failed closes its connection after warning, or
 * after the warning of another pool of its queue).
 */
const deafAndWarned = (lines: ReadonlyArray<string>) =>
  Effect.promise(() => transaction.clients()).pipe(
    Effect.map((clients) => clients.filter((c) => c.application === "docket listen").length),
    Effect.filterOrFail((n) => n === 0 && lines.some((l) => l.includes("LISTEN connection")), () => "still probing"),
    Effect.retry(Schedule.spaced("100 millis")),
    Effect.timeout("20 seconds")
  )

describe("listenDatabase is checked when the layer is built", () => {
  it.effect("beside a SQLite file, or not a PostgreSQL URL: DatabaseUnavailable saying so, nothing opened", () =>
    Effect.gen(function*() {
      const sqlite = yield* Effect.flip(Layer.build(Database.layer(":memory:", { listenDatabase: "postgres://root@127.0.0.1:1/x" })))
      expect(sqlite.reason).toBe("listenDatabase is for PostgreSQL: this database is a SQLite file")
      const notPg = yield* Effect.flip(Layer.build(Database.layer("postgres://root@127.0.0.1:1/x", { listenDatabase: "./x.db" })))
      expect(notPg.reason).toBe("listenDatabase must be a postgres:// or postgresql:// URL")
      // layerConfig reads it from DOCKET_LISTEN_DATABASE_URL.
      const fromEnv = yield* Effect.flip(Layer.build(Database.layerConfig()).pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([
          ["DOCKET_DATABASE_URL", ":memory:"],
          ["DOCKET_LISTEN_DATABASE_URL", "postgres://root@127.0.0.1:1/x"]
        ])))
      ))
      expect(fromEnv).toMatchObject({ reason: "listenDatabase is for PostgreSQL: this database is a SQLite file" })
    }).pipe(Effect.scoped))
})

describe.skipIf(!pgAvailable || !pgbouncerAvailable)("Docket behind PgBouncer", () => {
  describe("transaction pooling", () => {
    it.live("two migrators at once through the pooler: both succeed, one applies the schema", () =>
      Effect.gen(function*() {
        const { pooled } = yield* fresh(() => transaction)
        const migrator = Effect.provide(Migrations.run, Database.layer(pooled, { migrate: false }))
        const applied = yield* Effect.all([migrator, migrator], { concurrency: "unbounded" })
        expect(applied.flat().length).toBeGreaterThan(0)
        expect(new Set(applied.flat()).size).toBe(applied.flat().length)
        const rows = yield* elsewhere(pooled, Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM ${Migrations.TABLE}`)))
        expect(rows[0].n).toBe(applied.flat().length)
      }).pipe(Effect.timeout("60 seconds")))

    it.live("enqueue (in the application's transaction too), claim, complete and cancel through the pooler", () =>
      Effect.gen(function*() {
        const { pooled } = yield* fresh(() => transaction)
        yield* Effect.gen(function*() {
          const repo = yield* QueueRepo.QueueRepo
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe("CREATE TABLE orders (id int PRIMARY KEY)")
          // The application's own transaction: its row and its item commit together, or neither.
          const inOrder = (id: number) =>
            sql.withTransaction(Effect.zipRight(sql.unsafe("INSERT INTO orders VALUES ($1)", [id]), repo.enqueue("mail", { order: id })))
          yield* Effect.exit(sql.withTransaction(Effect.zipRight(inOrder(1), Effect.fail("the application changes its mind"))))
          const kept = yield* inOrder(2)
          expect(yield* sql.unsafe<{ id: number }>("SELECT id FROM orders")).toEqual([{ id: 2 }])
          const keyed = yield* repo.enqueue("mail", { order: 3 }, { key: "order-3" })
          expect((yield* repo.enqueue("mail", { order: 3 }, { key: "order-3" }))._tag).toBe("Deduplicated")
          const claims = yield* repo.claim({ worker: "w", limit: 10, lease: "1 minute" })
          expect(claims.map((c) => c.id)).toEqual([kept.id, keyed.id])
          expect(yield* repo.complete(claims[0])).toBe(true)
          // A cancel of a running item: its holder's writes are stale from then on.
          expect(yield* repo.cancel([claims[1].id])).toEqual(["cancelledRunning"])
          expect(yield* repo.complete(claims[1])).toBe(false)
          const states = yield* Effect.forEach([kept.id, keyed.id], (id) => Effect.map(repo.get(id), Option.map((i) => i.state)))
          expect(states).toEqual([Option.some("done"), Option.some("cancelled")])
        }).pipe(Effect.provide(repoLayer(pooled)))
      }).pipe(Effect.timeout("30 seconds")))

    it.live("an interrupted statement is cancelled through the pooler (a cancel request, which it forwards)", () =>
      Effect.gen(function*() {
        const { direct, pooled } = yield* fresh(() => transaction)
        const context = yield* Layer.build(repoLayer(pooled))
        const repo = Context.get(context, QueueRepo.QueueRepo)
        const locker = new pg.Client({ connectionString: direct })
        yield* Effect.promise(() => locker.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => locker.end()))
        yield* Effect.promise(() => locker.query("BEGIN; LOCK TABLE docket_items IN ACCESS EXCLUSIVE MODE"))
        // Read from a session of its own, outside the locker's transaction:
        // inside it, pg_stat_activity is read once and kept for the
        // transaction (a snapshot), so the waits would never be seen to change.
        const watcher = new pg.Client({ connectionString: direct })
        yield* Effect.promise(() => watcher.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => watcher.end()))
        const waiters = Effect.promise(() =>
          watcher.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%docket_enqueue_one(%'`
          )
        ).pipe(Effect.map((r) => r.rows[0].n))
        const until = (n: number, bound: Duration.DurationInput) =>
          waiters.pipe(
            Effect.repeat({ until: (m) => m === n, schedule: Schedule.spaced("10 millis") }),
            Effect.timeoutFail({ duration: bound, onTimeout: () => new Error(`not ${n} enqueue(s) waiting on the lock within ${Duration.format(Duration.decode(bound))}`) })
          )
        const blocked = yield* Effect.fork(repo.enqueue("job", 1))
        // The pool's first connection through PgBouncer, then the wait: a bound for a loaded machine.
        yield* until(1, "20 seconds")
        // Within 4 s: before the 5 s after which an unanswered cancel closes the connection instead.
        yield* Fiber.interrupt(blocked)
        yield* until(0, "4 seconds")
        yield* Effect.promise(() => locker.query("COMMIT"))
        // Cancelled, not left to insert once the lock went.
        const rows = yield* Effect.promise(() => locker.query<{ n: number }>("SELECT count(*)::int AS n FROM docket_items"))
        expect(rows.rows[0].n).toBe(0)
      }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

    it.live("with listenDatabase, an idle pool behind the pooler is woken by notifications: enqueues (in a transaction too) and cancels", () =>
      Effect.gen(function*() {
        const { direct, pooled } = yield* fresh(() => transaction)
        const started = yield* Deferred.make<void>()
        const Long = Handler.make("long", {
          payload: Schema.Unknown,
          run: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
        })
        // A poll of a minute and leases renewed every 20 s: only a notification explains what follows.
        const layer = poolOn(pooled, { handlers: [Ok, Long], poll: "1 minute", lease: "1 minute" }, { listenDatabase: direct })
        yield* Effect.gen(function*() {
          const worker = yield* Worker.Worker
          const events = yield* worker.subscribe
          yield* worker.whenIdle
          yield* listening(direct, 1)
          const sentAt = performance.now()
          const added = yield* elsewhere(pooled, Docket.client(Ok).enqueue(null))
          yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "10 seconds")
          console.log(`pickup through the pooler with listenDatabase: ${(performance.now() - sentAt).toFixed(1)} ms from the enqueue's send`)
          // An enqueue in another process's transaction through the pooler: notified at its commit.
          const inTransaction = yield* elsewhere(pooled, Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql.withTransaction(Docket.client(Ok).enqueue(1))))
          yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === inTransaction.id, "10 seconds")
          // A cancel from another process through the pooler: its NOTIFY on the cancel channel stops the run.
          const long = yield* elsewhere(pooled, Docket.client(Long).enqueue(null))
          yield* Deferred.await(started)
          yield* elsewhere(pooled, Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.cancel([long.id])))
          yield* waitForEvent(events, (e) => e._tag === "Cancelled" && e.claim.id === long.id, "10 seconds")
        }).pipe(Effect.provide(layer), Effect.scoped)
      }).pipe(Effect.timeout("60 seconds")))

    it.live("without listenDatabase, the pools find LISTEN deaf, warn once and poll; this process's cancels still stop runs at once", () =>
      withLogLines((lines) =>
        Effect.gen(function*() {
          const { pooled } = yield* fresh(() => transaction)
          const started = yield* Deferred.make<void>()
          const Long = Handler.make("long", {
            payload: Schema.Unknown,
            run: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
          })
          // Two pools on one queue (one Wakeups): one warning between them.
          const repo = yield* Layer.build(repoLayer(pooled))
          const options = { handlers: [Ok, Long], poll: "300 millis", lease: "1 minute" } as const
          const pools = yield* Effect.all([Worker.make(options), Worker.make(options)]).pipe(Effect.provide(repo))
          const queues = yield* Effect.forEach(pools, (p) => p.subscribe)
          // An event of either pool (either may take an item).
          const inEither = (predicate: (e: Event) => boolean) =>
            Effect.raceAll(queues.map((q) => waitForEvent(q, predicate, "10 seconds")))
          // Both have given up listening: no LISTEN connection is left on the pooler, and the warning is out.
          yield* deafAndWarned(lines)
          const warnings = lines.filter((l) => l.includes("LISTEN"))
          expect(warnings).toHaveLength(1)
          expect(warnings[0]).toMatch(
            /^WARN: docket: a notification sent through the pool did not reach the LISTEN connection within \d+(\.\d)? s/
          )
          expect(warnings[0]).toContain("listenDatabase")
          expect(warnings[0]).toContain("--listen-database")
          // Items enqueued elsewhere are found by the poll.
          const added = yield* elsewhere(pooled, Docket.client(Ok).enqueue(null))
          yield* inEither((e) => e._tag === "Completed" && e.claim.id === added.id)
          // A cancel in this process reaches its pools at once (leases are renewed only every 20 s).
          const long = yield* Effect.provide(Docket.client(Long).enqueue(null), repo)
          yield* Deferred.await(started)
          yield* Effect.provide(Effect.flatMap(QueueRepo.QueueRepo, (r) => r.cancel([long.id])), repo)
          yield* inEither((e) => e._tag === "Cancelled" && e.claim.id === long.id)
        }).pipe(Effect.scoped, Effect.timeout("60 seconds"))))

    it.live("listen: false opens no LISTEN connection: no probe, no warning (beside a pool that warns)", () =>
      withLogLines((lines) =>
        Effect.gen(function*() {
          const quiet = yield* fresh(() => transaction)
          const probing = yield* fresh(() => transaction)
          // The quiet pool first, then one that probes, on two queues: a warning each, were both to probe.
          yield* Layer.build(poolOn(quiet.pooled, { handlers: [Ok], listen: false }))
          yield* Layer.build(poolOn(probing.pooled, { handlers: [Ok] }))
          // Every probe over: the warning out, and no LISTEN connection left on the pooler.
          yield* deafAndWarned(lines)
          expect(lines.filter((l) => l.includes("LISTEN"))).toHaveLength(1)
        }).pipe(Effect.scoped, Effect.timeout("60 seconds"))))

    it.live("a listenDatabase on another database than the pool's is found deaf too, and named in the warning", () =>
      withLogLines((lines) =>
        Effect.gen(function*() {
          const { pooled } = yield* fresh(() => transaction)
          const other = yield* fresh(() => transaction)
          yield* Effect.gen(function*() {
            yield* Effect.sync(() => lines).pipe(
              Effect.filterOrFail((l) => l.some((line) => line.includes("LISTEN")), () => "no warning yet"),
              Effect.retry(Schedule.spaced("100 millis")),
              Effect.timeout("20 seconds")
            )
          }).pipe(Effect.provide(poolOn(pooled, { handlers: [Ok] }, { listenDatabase: other.direct })), Effect.scoped)
          const warnings = lines.filter((l) => l.includes("LISTEN"))
          expect(warnings).toHaveLength(1)
          expect(warnings[0]).toContain(`on listenDatabase (${other.direct})`)
          expect(warnings[0]).toContain("listenDatabase must reach the same database as the pool")
        }).pipe(Effect.timeout("60 seconds"))))

    it.live("recurring ticks through the pooler: each tick of an every-second schedule enqueued once by two pools, and run", () =>
      Effect.gen(function*() {
        const { pooled } = yield* fresh(() => transaction)
        const Tick = Handler.make("tick", { payload: Schema.Unknown, run: () => Effect.void })
        const options: Worker.Options = {
          handlers: [Tick],
          recurring: [Recurring.make("tick.every", { cron: "* * * * * *", kind: "tick" })],
          poll: "200 millis"
        }
        yield* Effect.gen(function*() {
          yield* Worker.make(options)
          const ticks = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql.unsafe<{ run_at: string; n: number; done: number }>(
              `SELECT run_at::text, count(*)::int AS n, count(*) FILTER (WHERE state = 'done')::int AS done
               FROM docket_items_all WHERE kind = 'tick' GROUP BY run_at`
            )).pipe(
              Effect.filterOrFail((rows) => rows.filter((r) => r.done > 0).length >= 3, () => "fewer than 3 ticks run"),
              Effect.retry(Schedule.spaced("100 millis")),
              Effect.timeout("20 seconds")
            )
          for (const tick of ticks) expect(tick.n, tick.run_at).toBe(1)
        }).pipe(Effect.provide(poolOn(pooled, options)), Effect.scoped)
      }).pipe(Effect.timeout("60 seconds")))

    it.live("the dashboard over a pooled URL: its API reads and acts", () =>
      Effect.gen(function*() {
        const { pooled } = yield* fresh(() => transaction)
        const token = "pooled-token-0123456789abcdef"
        const served = yield* Effect.acquireRelease(Effect.promise(() => serve(pooled, { token })), (s) => Effect.promise(s.dispose))
        const added = yield* Effect.promise(() => served.repo((r) => r.enqueue("mail", { to: "ada" })))
        const listed = yield* Effect.promise(async () => (await fetch(`${served.root}/api/items?state=waiting`)).json())
        expect((listed as { items: Array<{ id: number }> }).items.map((i) => i.id)).toEqual([added.id])
        const cancel = yield* Effect.promise(() =>
          postJson(`${served.root}/api/items/${added.id}/cancel`, undefined, { authorization: `Bearer ${token}` })
        )
        expect(cancel.status).toBe(200)
        expect(yield* Effect.promise(() => cancel.json())).toEqual({ id: added.id, action: "cancel", outcome: "cancelled" })
        const metrics = yield* Effect.promise(async () => (await fetch(`${served.root}/metrics`)).text())
        expect(metrics).toMatch(/^docket_items\{kind="mail",state="cancelled"\} 1$/m)
      }).pipe(Effect.scoped, Effect.timeout("30 seconds")))
  })

  describe("session pooling", () => {
    it.live("works as a direct connection: LISTEN through it hears enqueues, no warning", () =>
      withLogLines((lines) =>
        Effect.gen(function*() {
          const { direct, pooled } = yield* fresh(() => session)
          yield* Effect.gen(function*() {
            const worker = yield* Worker.Worker
            const events = yield* worker.subscribe
            yield* worker.whenIdle
            yield* listening(direct, 1)
            const added = yield* elsewhere(pooled, Docket.client(Ok).enqueue(null))
            yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "10 seconds")
          }).pipe(Effect.provide(poolOn(pooled, { handlers: [Ok], poll: "1 minute" })), Effect.scoped)
          expect(lines.filter((l) => l.includes("LISTEN"))).toEqual([])
        }).pipe(Effect.timeout("60 seconds"))))

    it.live("as a listenDatabase beside a transaction pool: the pool is woken through it", () =>
      withLogLines((lines) =>
        Effect.gen(function*() {
          const { direct, pooled } = yield* fresh(() => transaction)
          const listenDatabase = session.through(direct)
          yield* Effect.gen(function*() {
            const worker = yield* Worker.Worker
            const events = yield* worker.subscribe
            yield* worker.whenIdle
            yield* listening(direct, 1)
            const added = yield* elsewhere(pooled, Docket.client(Ok).enqueue(null))
            yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "10 seconds")
          }).pipe(Effect.provide(poolOn(pooled, { handlers: [Ok], poll: "1 minute" }, { listenDatabase })), Effect.scoped)
          expect(lines.filter((l) => l.includes("LISTEN"))).toEqual([])
        }).pipe(Effect.timeout("60 seconds"))))
  })
})
