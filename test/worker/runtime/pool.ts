/**
 * The runtime suite: the pool itself (concurrency, lease renewal and loss,
 * shutdown, wake-ups, per-kind services, logs and spans, typed clients, prefetch)
 * against a real database; run on SQLite and PostgreSQL by
 * test/worker/runtime/sqlite.test.ts and pg.test.ts.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { Context, Deferred, Effect, Exit, Fiber, FiberId, HashMap, Layer, Logger, Option, Schedule, Schema, Scope, type Tracer } from "effect"
import { Docket, Handler, QueueRepo, Retry, Worker } from "../../../src/index.js"
import type { Backend } from "../../support/db.js"
import { pgSession, repoLayer, setRow } from "../../support/db.js"
import { waitForCount, waitForEvent } from "../../support/events.js"
import { recordingTracer } from "../../support/tracing.js"
import { withPool } from "../../support/harness.js"
import { item } from "../../support/runtime.js"

const SqlClientTag = SqlClient.SqlClient

const runsAndLeases = (backend: Backend) => {
  it.live("never runs more than its concurrency, nor more than a kind's own limit", () => {
    let now = 0
    let max = 0
    let nowLimited = 0
    let maxLimited = 0
    const gate = Effect.runSync(Deferred.make<void>())
    const track = (limited: boolean) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          now++
          max = Math.max(max, now)
          if (limited) {
            nowLimited++
            maxLimited = Math.max(maxLimited, nowLimited)
          }
        }),
        () => Deferred.await(gate),
        () =>
          Effect.sync(() => {
            now--
            if (limited) nowLimited--
          })
      )
    const Wide = Handler.make("wide", { payload: Schema.Unknown, run: () => track(false) })
    const Narrow = Handler.make("narrow", { payload: Schema.Unknown, concurrency: 2, run: () => track(true) })
    return withPool(backend, { handlers: [Wide, Narrow], concurrency: 4, prefetch: 4 }, () =>
      Effect.gen(function*() {
        const worker = yield* Worker.Worker
        const events = yield* worker.subscribe
        yield* Docket.client(Narrow).enqueueMany(Array.from({ length: 10 }, (_, i) => ({ payload: i, priority: 1 })))
        yield* Docket.client(Wide).enqueueMany(Array.from({ length: 20 }, (_, i) => ({ payload: i })))
        // Four start (two narrow at most), then nothing more until the gate opens.
        yield* waitForCount(events, (e) => e._tag === "Started", 4)
        expect(now).toBe(4)
        expect(nowLimited).toBe(2)
        yield* Deferred.succeed(gate, undefined)
        yield* waitForCount(events, (e) => e._tag === "Completed", 30)
        expect(max).toBe(4)
        expect(maxLimited).toBe(2)
      }))
  })

  it.live("lease renewal keeps a run alive past many lease lengths: it runs once", () => {
    const runs: Array<string> = []
    const Long = Handler.make("long", {
      payload: Schema.Unknown,
      run: (_, job) => Effect.sync(() => runs.push(job.worker)).pipe(Effect.zipRight(Effect.sleep("2500 millis")))
    })
    return withPool(backend, { handlers: [Long], lease: "600 millis", worker: "first" }, (url) =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const added = yield* Docket.client(Long).enqueue(null)
        yield* waitForEvent(events, (e) => e._tag === "Started" && e.claim.id === added.id)
        // While it runs, a second worker on its own connection keeps trying to claim it.
        const second = Worker.layer({ handlers: [Long], lease: "600 millis", poll: "50 millis", worker: "second" }).pipe(
          Layer.provideMerge(repoLayer(url))
        )
        const scope = yield* Scope.make()
        yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
        yield* Layer.buildWithScope(second, scope)
        yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
        expect(runs).toEqual(["first"])
      }))
  })

  it.live("a run whose lease was taken is interrupted, and its outcome is not recorded", () => {
    let interrupted = false
    const Long = Handler.make("long", {
      payload: Schema.Unknown,
      run: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true))))
    })
    return withPool(backend, { handlers: [Long], lease: "600 millis", worker: "loser" }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const repo = yield* QueueRepo.QueueRepo
        const added = yield* Docket.client(Long).enqueue(null)
        const { event: started } = yield* waitForEvent(events, (e) => e._tag === "Started")
        if (started._tag !== "Started") return
        // Another worker takes the item over, as a claim after the lease ran
        // out would: a new token, its name, a fresh lease.
        const taken: QueueRepo.Claim = { ...started.claim, token: started.claim.token + 1, worker: "thief", attempt: 2 }
        yield* setRow(added.id, { lease_seq: taken.token, claimed_by: "thief", attempts: 2, lease_until: Date.now() + 600_000 })
        expect(taken.id).toBe(added.id)
        yield* waitForEvent(events, (e) => e._tag === "LeaseLost")
        expect(interrupted).toBe(true)
        const row = yield* item(added.id)
        expect(row).toMatchObject({ state: "running", claimedBy: "thief", attempts: 2 })
        expect(yield* repo.complete(taken)).toBe(true)
      }))
  })
}

const shutdown = (backend: Backend) => {
  it.live("shutdown releases leases: running and prefetched items wait again, attempt not counted", () => {
    const Long = Handler.make("long", { payload: Schema.Unknown, run: () => Effect.never })
    return Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const ids = yield* Effect.scoped(
        Effect.gen(function*() {
          const events = yield* (yield* Worker.Worker).subscribe
          const results = yield* Docket.client(Long).enqueueMany(Array.from({ length: 5 }, (_, i) => ({ payload: i })))
          yield* waitForCount(events, (e) => e._tag === "Started", 2)
          return results.map((r) => r.id)
        }).pipe(
          Effect.provide(
            Worker.layer({ handlers: [Long], concurrency: 2, prefetch: 3, grace: "100 millis" }).pipe(
              Layer.provideMerge(repoLayer(url))
            )
          )
        )
      )
      const rows = yield* Effect.scoped(
        Effect.provide(Effect.forEach(ids, item), repoLayer(url))
      )
      for (const row of rows) {
        expect(row).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null, leaseUntil: null })
      }
    })
  })

  it.live.skipIf(backend.name !== "pg")("shutdown waits for the outcomes being written: none is cancelled, no item runs again", () => {
    const gate = Deferred.unsafeMake<void>(FiberId.none)
    const stoppingLogged = Deferred.unsafeMake<void>(FiberId.none)
    const capture = Logger.add(Logger.make(({ message }) => {
      if (String(Array.isArray(message) ? message[0] : message).startsWith("docket: stopping: recording 1 outcomes")) {
        Deferred.unsafeDone(stoppingLogged, Exit.void)
      }
    }))
    const Gated = Handler.make("gated", { payload: Schema.Unknown, run: () => Deferred.await(gate) })
    return Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const locker = yield* pgSession(url, "test locker")
      const observer = yield* pgSession(url, "test observer")
      const deleteWaits = Effect.promise(() =>
        observer.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO docket_done%'`
        )
      ).pipe(Effect.map((r) => r.rows[0].n === 1))

      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Worker.layer({ handlers: [Gated] }).pipe(Layer.provideMerge(repoLayer(url)), Layer.provide(capture)),
        scope
      )
      const events = yield* Effect.provide(Effect.flatMap(Worker.Worker, (w) => w.subscribe), context).pipe(Scope.extend(scope))
      const added = yield* Effect.provide(Docket.client(Gated).enqueue(null), context)
      yield* waitForEvent(events, (e) => e._tag === "Started" && e.claim.id === added.id)
      // Another session locks the item's row: its completion will wait on it.
      yield* Effect.promise(() => locker.query("BEGIN"))
      yield* Effect.promise(() => locker.query("SELECT id FROM docket_items WHERE id = $1 FOR UPDATE", [added.id]))
      yield* Deferred.succeed(gate, undefined)
      yield* deleteWaits.pipe(
        Effect.filterOrFail((waits) => waits, () => "the completion is not waiting yet"),
        Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds")))
      )
      // Shutdown starts while the completion is in flight: it says it waits
      // for it, and the statement is still there (a shutdown that cut it off
      // would have cancelled it).
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      const cancelled = deleteWaits.pipe(
        Effect.filterOrFail((waits) => !waits, () => "still waiting"),
        Effect.retry(Schedule.spaced("20 millis"))
      )
      yield* Effect.raceFirst(Deferred.await(stoppingLogged), cancelled).pipe(Effect.timeout("10 seconds"))
      expect(yield* deleteWaits).toBe(true)
      yield* Effect.promise(() => locker.query("COMMIT"))
      yield* Fiber.join(closing)
      // The completion was written: the item is done, not left running until its lease ends.
      const row = yield* Effect.scoped(Effect.provide(item(added.id), repoLayer(url)))
      expect(row?.state).toBe("done")
    }).pipe(Effect.scoped, Effect.timeout("45 seconds"))
  })
}

const failedWritesAndKilledWorkers = (backend: Backend) => {
  it.live.skipIf(backend.name !== "pg")("a failed outcome statement retries only its own outcomes: completions beside it are not written twice", () => {
    const gate = Deferred.unsafeMake<void>(FiberId.none)
    const Gated = Handler.make("gated", { payload: Schema.Unknown, run: () => Deferred.await(gate) })
    const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
    const Bad = Handler.make("bad", { payload: Schema.Unknown, run: () => Effect.fail(new Retry({ reason: "boom-db" })) })
    return withPool(backend, { handlers: [Gated, Ok, Bad], concurrency: 4 }, (url) =>
      Effect.gen(function*() {
        const locker = yield* pgSession(url)
        const admin = yield* pgSession(url)
        const query = (client: pg.Client, text: string, params: Array<unknown> = []) =>
          Effect.promise(() => client.query(text, params))
        // The database refuses to record the failure (a trigger), until the test drops it.
        yield* query(admin, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'refused by the test'; END $$`)
        yield* query(admin, `CREATE TRIGGER refuse BEFORE UPDATE ON docket_items FOR EACH ROW
            WHEN (NEW.last_error LIKE '%boom-db%') EXECUTE FUNCTION refuse()`)
        const worker = yield* Worker.Worker
        const events = yield* worker.subscribe
        // A first outcome holds the writer: its completion waits on a row lock.
        const held = yield* Docket.client(Gated).enqueue(null)
        yield* waitForEvent(events, (e) => e._tag === "Started" && e.claim.id === held.id)
        yield* query(locker, "BEGIN")
        yield* query(locker, "SELECT id FROM docket_items WHERE id = $1 FOR UPDATE", [held.id])
        yield* Deferred.succeed(gate, undefined)
        // Meanwhile one item completes and one fails: both outcomes wait for the next batch.
        yield* Docket.client(Ok).enqueue(null)
        yield* Docket.client(Bad).enqueue(null)
        yield* waitForCount(events, (e) => e._tag === "Started", 2)
        yield* worker.counters.pipe(
          Effect.filterOrFail((c) => c.running === 0 && c.completed === 0, () => "not both ended yet"),
          Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("10 seconds")))
        )
        yield* query(locker, "COMMIT")
        // The failure's statement is refused; the completion beside it is written once.
        yield* waitForEvent(events, (e) => e._tag === "StorageFailed" && e.operation === "record outcome")
        yield* query(admin, "DROP TRIGGER refuse ON docket_items")
        yield* waitForEvent(events, (e) => e._tag === "Retried")
        const counters = yield* worker.counters
        expect(counters).toMatchObject({ completed: 2, retried: 1, stale: 0 })
      }))
  })

  it.live("a killed worker's item is claimed again after its lease, by another worker", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const Hang = Handler.make("hang", { payload: Schema.Unknown, run: () => Effect.void })
      // Migrate and enqueue first, then start the doomed worker process.
      const added = yield* Effect.scoped(
        Effect.provide(Docket.client(Hang).enqueue({ n: 1 }), repoLayer(url))
      )
      const fixture = fileURLToPath(new URL("../../fixtures/hang-worker.ts", import.meta.url))
      const child = spawn(process.execPath, ["--import", "tsx", fixture, url], { stdio: ["ignore", "pipe", "inherit"] })
      const started = yield* Effect.async<string>((resume) => {
        const lines = createInterface({ input: child.stdout })
        lines.once("line", (line) => resume(Effect.succeed(line)))
      }).pipe(Effect.timeout("30 seconds"))
      expect(started).toBe(`started ${added.id}`)
      child.kill("SIGKILL")
      yield* Effect.async<void>((resume) => {
        child.once("exit", () => resume(Effect.void))
      })
      const killedAt = Date.now()
      // Another worker takes it over once the 1 s lease ran out.
      const completed = yield* Effect.scoped(
        Effect.gen(function*() {
          const events = yield* (yield* Worker.Worker).subscribe
          const { event } = yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
          return event
        }).pipe(
          Effect.provide(
            Worker.layer({ handlers: [Hang], poll: "200 millis", worker: "rescuer" }).pipe(Layer.provideMerge(repoLayer(url)))
          )
        )
      )
      expect(completed._tag === "Completed" && completed.claim.attempt).toBe(2)
      expect(Date.now() - killedAt).toBeLessThan(10_000)
    }).pipe(Effect.timeout("60 seconds")))
}

const wakeUps = (backend: Backend) => {
  it.live("an enqueue wakes an idle worker at once, even with the poll set to a minute", () => {
    const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
    return withPool(backend, { handlers: [Ok], poll: "1 minute" }, (url) =>
      Effect.gen(function*() {
        const worker = yield* Worker.Worker
        const events = yield* worker.subscribe
        yield* worker.whenIdle
        // Enqueue through a separate connection pool: on PostgreSQL only NOTIFY
        // can wake the worker; on SQLite (one process) the in-process signal does.
        const enqueue = backend.name === "pg"
          ? Effect.scoped(Effect.provide(Docket.client(Ok).enqueue({ at: Date.now() }), repoLayer(url)))
          : Docket.client(Ok).enqueue({ at: Date.now() })
        const added = yield* enqueue
        const start = Date.now()
        yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "10 seconds")
        expect(Date.now() - start).toBeLessThan(10_000)
      }))
  })

  it.live.skipIf(backend.name !== "pg")("a lost LISTEN connection is re-established, and wake-ups come back", () => {
    const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
    return withPool(backend, { handlers: [Ok], poll: "1 minute" }, (url) =>
      Effect.gen(function*() {
        const worker = yield* Worker.Worker
        const events = yield* worker.subscribe
        yield* worker.whenIdle
        const other = repoLayer(url)
        // Kill the listening connection, as a database restart or a network cut would.
        const killed = yield* Effect.scoped(Effect.provide(
          Effect.flatMap(SqlClientTag, (sql) =>
            sql.unsafe<{ n: number }>(
              "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = 'docket listen' AND datname = current_database()"
            )),
          other
        ))
        expect(killed[0].n).toBe(1)
        // Once it listens again (within about a second), an enqueue from elsewhere wakes it.
        yield* Effect.scoped(Effect.provide(
          Effect.flatMap(SqlClientTag, (sql) =>
            sql.unsafe<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'docket listen' AND datname = current_database()"
            )).pipe(
              Effect.filterOrFail((rows) => rows[0].n === 1, () => "not listening yet"),
              Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
            ),
          other
        ))
        const added = yield* Effect.scoped(Effect.provide(Docket.client(Ok).enqueue(null), other))
        yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "10 seconds")
      }))
  })

  it.live("a scheduled item wakes the pool at its run-after time", () => {
    const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
    return withPool(backend, { handlers: [Ok], poll: "1 minute" }, () =>
      Effect.gen(function*() {
        const worker = yield* Worker.Worker
        const events = yield* worker.subscribe
        yield* worker.whenIdle
        const added = yield* Docket.client(Ok).enqueue(null, { delay: "300 millis" })
        const { event } = yield* waitForEvent(events, (e) => e._tag === "Started", "10 seconds")
        expect(event._tag === "Started" && event.claim.id).toBe(added.id)
        expect(Date.now()).toBeGreaterThanOrEqual(event._tag === "Started" ? event.claim.runAt - 50 : 0)
      }))
  })

  it.live("an enqueue while a keyed item runs is kept, and runs after it", () => {
    const order: Array<string> = []
    const gate = Effect.runSync(Deferred.make<void>())
    const Mirror = Handler.make("mirror.refresh", {
      payload: Schema.Struct({ push: Schema.Number }),
      run: (p) =>
        Effect.sync(() => order.push(`start ${p.push}`)).pipe(
          Effect.zipRight(p.push === 1 ? Deferred.await(gate) : Effect.void),
          Effect.zipRight(Effect.sync(() => order.push(`end ${p.push}`)))
        )
    })
    return withPool(backend, { handlers: [Mirror], concurrency: 4 }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const mirror = Docket.client(Mirror)
        yield* mirror.enqueue({ push: 1 }, { key: "repo-1" })
        yield* waitForEvent(events, (e) => e._tag === "Started")
        const second = yield* mirror.enqueue({ push: 2 }, { key: "repo-1" })
        const third = yield* mirror.enqueue({ push: 3 }, { key: "repo-1" })
        expect(second._tag).toBe("Enqueued")
        expect(third).toEqual({ _tag: "Deduplicated", id: second.id })
        yield* Deferred.succeed(gate, undefined)
        yield* waitForCount(events, (e) => e._tag === "Completed", 2)
        expect(order).toEqual(["start 1", "end 1", "start 2", "end 2"])
      }))
  })
}

const servicesAndLogs = (backend: Backend) => {
  it.live("per-kind handler services: a Handler.layer with its own dependencies is run by the pool", () => {
    class Mailer extends Context.Tag("test/Mailer")<Mailer, { readonly sent: Array<string> }>() {}
    const SendEmail = Handler.make("email.send", {
      payload: Schema.Struct({ to: Schema.String }),
      run: ({ to }) => Effect.map(Mailer, (mailer) => void mailer.sent.push(to))
    })
    const sent: Array<string> = []
    return Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const live = Worker.layer({ handlers: [] }).pipe(
        Layer.provide(Handler.layer(SendEmail)),
        Layer.provide(Layer.succeed(Mailer, { sent })),
        Layer.provideMerge(repoLayer(url))
      )
      yield* Effect.scoped(
        Effect.gen(function*() {
          const events = yield* (yield* Worker.Worker).subscribe
          yield* Docket.client(SendEmail).enqueue({ to: "ada@example.com" })
          yield* waitForEvent(events, (e) => e._tag === "Completed")
        }).pipe(Effect.provide(live))
      )
      expect(sent).toEqual(["ada@example.com"])
    })
  })

  it.live("a handler's logs (and its forked fibers') carry the item's kind, id, attempt and worker", () => {
    const lines: Array<Record<string, unknown>> = []
    // Latches: the forked daemons log once both items are done; the test
    // reads their lines once both are written.
    const bothDone = Deferred.unsafeMake<void>(FiberId.none)
    const bothLate = Deferred.unsafeMake<void>(FiberId.none)
    const capture = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ annotations, message }) => {
        lines.push({ message: String(Array.isArray(message) ? message[0] : message), ...Object.fromEntries(HashMap.toEntries(annotations)) })
        if (lines.filter((l) => String(l.message).startsWith("late")).length === 2) Deferred.unsafeDone(bothLate, Exit.void)
      })
    )
    const Noisy = Handler.make("noisy", {
      payload: Schema.Number,
      run: (n) =>
        Effect.zipRight(
          Effect.logInfo(`working on ${n}`),
          // A fiber the handler forks carries them too; its own annotations win.
          Effect.fork(Effect.logInfo(`child of ${n}`).pipe(Effect.annotateLogs("kind", "mine"))).pipe(Effect.flatMap(Fiber.join))
        ).pipe(
          // A fiber that outlives its item (the slot has moved on) keeps its item.
          Effect.zipLeft(Effect.forkDaemon(Effect.zipRight(Deferred.await(bothDone), Effect.logInfo(`late ${n}`))))
        )
    })
    return Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      // One slot: the second item runs in the fiber that ran (and joined a
      // child of) the first, and the first's daemon logs after it moved on.
      const live = Worker.layer({ handlers: [Noisy], worker: "w-logs", concurrency: 1 }).pipe(
        Layer.provide(capture),
        Layer.provideMerge(repoLayer(url))
      )
      yield* Effect.scoped(
        Effect.gen(function*() {
          const events = yield* (yield* Worker.Worker).subscribe
          const a = yield* Docket.client(Noisy).enqueue(1)
          const b = yield* Docket.client(Noisy).enqueue(2)
          yield* waitForCount(events, (e) => e._tag === "Completed", 2)
          const work = lines.filter((l) => String(l.message).startsWith("working on"))
          expect(work).toContainEqual({ message: "working on 1", kind: "noisy", id: a.id, attempt: 1, worker: "w-logs" })
          expect(work).toContainEqual({ message: "working on 2", kind: "noisy", id: b.id, attempt: 1, worker: "w-logs" })
          const children = lines.filter((l) => String(l.message).startsWith("child of"))
          expect(children).toContainEqual({ message: "child of 1", kind: "mine", id: a.id, attempt: 1, worker: "w-logs" })
          expect(children).toContainEqual({ message: "child of 2", kind: "mine", id: b.id, attempt: 1, worker: "w-logs" })
          yield* Deferred.succeed(bothDone, undefined)
          yield* Deferred.await(bothLate)
          const late = lines.filter((l) => String(l.message).startsWith("late"))
          expect(late).toContainEqual({ message: "late 1", kind: "noisy", id: a.id, attempt: 1, worker: "w-logs" })
          expect(late).toContainEqual({ message: "late 2", kind: "noisy", id: b.id, attempt: 1, worker: "w-logs" })
        }).pipe(Effect.provide(live))
      )
    })
  })
}

const spans = (backend: Backend) => {
  it.live("spans: enqueues and runs are traced under an application's tracer, not under Effect's built-in one", () => {
    const { made, tracer: recording } = recordingTracer()
    // Each run reports the span it runs in (None without docket.item).
    const seenIn: Array<string | undefined> = []
    const Traced = Handler.make("traced", {
      payload: Schema.Number,
      run: () => Effect.map(Effect.option(Effect.currentSpan), (span) => void seenIn.push(Option.getOrUndefined(span)?.name))
    })
    const round = (tracer: Tracer.Tracer | undefined) =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const base = Worker.layer({ handlers: [Traced] }).pipe(Layer.provideMerge(repoLayer(url)))
        yield* Effect.scoped(
          Effect.gen(function*() {
            const events = yield* (yield* Worker.Worker).subscribe
            const repo = yield* QueueRepo.QueueRepo
            yield* repo.enqueue("traced", 1)
            yield* repo.enqueueMany([{ kind: "traced", payload: 2 }, { kind: "traced", payload: 3 }])
            yield* waitForCount(events, (e) => e._tag === "Completed", 3)
          }).pipe(
            Effect.provide(tracer === undefined ? base : base.pipe(Layer.provide(Layer.setTracer(tracer)))),
            tracer === undefined ? (e) => e : Effect.withTracer(tracer)
          )
        )
      })
    return Effect.gen(function*() {
      const spans = () => made.map((span) => ({ name: span.name, attributes: Object.fromEntries(span.attributes) }))
      // (That enqueues make no span under the built-in tracer is test/tracing.test.ts's.)
      yield* round(undefined)
      expect(seenIn).toEqual([undefined, undefined, undefined])
      seenIn.length = 0
      yield* round(recording)
      const ours = spans().filter((s) => s.name.startsWith("docket."))
      expect(ours.filter((s) => s.name === "docket.enqueue")).toEqual([{ name: "docket.enqueue", attributes: { kind: "traced" } }])
      expect(ours.filter((s) => s.name === "docket.enqueueMany")).toEqual([{ name: "docket.enqueueMany", attributes: { count: 2 } }])
      expect(ours.filter((s) => s.name === "docket.item")).toHaveLength(3)
      expect(seenIn).toEqual(["docket.item", "docket.item", "docket.item"])
      // Each run's span links to its enqueue's span (the batch's for a batch), across the queue.
      const one = made.find((s) => s.name === "docket.enqueue")!
      const many = made.find((s) => s.name === "docket.enqueueMany")!
      expect([one.kind, many.kind]).toEqual(["producer", "producer"])
      const items = made.filter((s) => s.name === "docket.item")
      const linked = items.map((s) => {
        expect(s.kind).toBe("consumer")
        expect(s.links).toHaveLength(1)
        expect(s.links[0].attributes).toEqual({ "docket.link": "enqueued" })
        const target = s.links[0].span
        return [target.traceId, target.spanId, target.sampled]
      })
      expect(linked.sort()).toEqual([
        [one.traceId, one.spanId, true],
        [many.traceId, many.spanId, true],
        [many.traceId, many.spanId, true]
      ].sort())
    })
  })

  it.live("spans: a malformed stored span context links nothing, and the item runs", () => {
    const { made, tracer } = recordingTracer()
    const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
    return Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const bad = ["garbage", "00-00000000000000000000000000000000-0000000000000000-01", `01-${"a".repeat(32)}-${"b".repeat(16)}-01`]
      const ids = yield* Effect.scoped(Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const ids: Array<number> = []
        for (const context of bad) {
          const added = yield* repo.enqueue("ok", context)
          yield* setRow(added.id, { trace_context: context })
          ids.push(added.id)
        }
        return ids
      }).pipe(Effect.provide(repoLayer(url))))
      yield* Effect.scoped(Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        yield* waitForCount(events, (e) => e._tag === "Completed", bad.length)
      }).pipe(
        Effect.provide(Worker.layer({ handlers: [Ok] }).pipe(Layer.provideMerge(repoLayer(url)), Layer.provide(Layer.setTracer(tracer)))),
        Effect.withTracer(tracer)
      ))
      const items = made.filter((s) => s.name === "docket.item")
      expect(items.map((s) => s.attributes.get("docket.id")).sort()).toEqual([...ids].sort())
      for (const s of items) expect(s.links).toEqual([])
    })
  })
}

const clientsAndPrefetch = (backend: Backend) => {
  it.live("attemptOrEnqueue: done at once, or queued when the first try fails", () => {
    const Send = Handler.make("send", { payload: Schema.Struct({ to: Schema.String }), run: () => Effect.void })
    return withPool(backend, { handlers: [Send] }, () =>
      Effect.gen(function*() {
        const ok = yield* Docket.attemptOrEnqueue(Effect.succeed("sent"), Send, { to: "a" })
        expect(ok).toEqual({ _tag: "Done", value: "sent" })
        const queued = yield* Docket.attemptOrEnqueue(Effect.fail(new Error("refused")), Send, { to: "b" }, { delay: "1 hour" })
        expect(queued._tag).toBe("Queued")
        if (queued._tag !== "Queued") return
        expect(queued.error).toBe("Error: refused")
        const row = yield* item(queued.result.id)
        expect(row).toMatchObject({ state: "waiting", payload: { to: "b" } })
      }))
  })

  it.live("a typed client refuses a payload its schema cannot encode, writing nothing", () => {
    const Typed = Handler.make("typed", {
      payload: Schema.Struct({ n: Schema.Number.pipe(Schema.int()) }),
      run: () => Effect.void
    })
    return withPool(backend, { handlers: [Typed] }, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Docket.client(Typed).enqueue({ n: 1.5 }))
        expect(error._tag).toBe("InvalidInput")
        const stats = yield* (yield* QueueRepo.QueueRepo).stats
        expect(stats.due + stats.scheduled + stats.running + stats.dead).toBe(0)
      }))
  })

  it.live("a prefetched item that cannot start soon is released for other workers", () => {
    const gate = Effect.runSync(Deferred.make<void>())
    const Block = Handler.make("block", { payload: Schema.Unknown, run: () => Deferred.await(gate) })
    return withPool(backend, { handlers: [Block], concurrency: 1, prefetch: 2, prefetchHold: "100 millis" }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        yield* Docket.client(Block).enqueueMany([{ payload: 1 }, { payload: 2 }, { payload: 3 }])
        yield* waitForEvent(events, (e) => e._tag === "Released")
        // Released, and not claimed again while the only slot stays busy.
        const stats = yield* (yield* QueueRepo.QueueRepo).stats
        expect(stats.running).toBe(1)
        expect(stats.due).toBe(2)
        yield* Deferred.succeed(gate, undefined)
        yield* waitForCount(events, (e) => e._tag === "Completed", 3)
      }))
  })
}

export const poolRuntimeSuite = (backend: Backend) => {
  describe("the pool", () => {
    runsAndLeases(backend)
    shutdown(backend)
    failedWritesAndKilledWorkers(backend)
    wakeUps(backend)
    servicesAndLogs(backend)
    spans(backend)
    clientsAndPrefetch(backend)
  })
}
