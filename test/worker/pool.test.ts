import { afterAll, describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, type Duration, Effect, Exit, Fiber, Layer, Queue, Schema, Scope } from "effect"
import * as Handler from "../../src/Handler.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import * as Wakeups from "../../src/Wakeups.js"
import * as Worker from "../../src/Worker.js"
import { repoLayer, sqliteBackend } from "../support/db.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())

const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })

// The pool as a whole (src/Worker.ts) over a real SQLite file.
describe("the pool", () => {
  it.live("whenIdle waits for the outcomes being written, not only for those waiting to be", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const real = yield* Layer.build(repoLayer(url))
      const repo = yield* Effect.provide(QueueRepo.QueueRepo, real)
      const wakeups = yield* Effect.provide(Wakeups.Wakeups, real)
      // The completion statement waits at a gate once it has started.
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const gated: QueueRepo.Service = {
        ...repo,
        completeMany: (claims) =>
          Effect.zipRight(Deferred.succeed(entered, undefined), Effect.zipRight(Deferred.await(gate), repo.completeMany(claims)))
      }
      const worker = yield* Worker.make({ handlers: [Ok], poll: "1 minute" }).pipe(
        Effect.provideService(QueueRepo.QueueRepo, gated),
        Effect.provideService(Wakeups.Wakeups, wakeups)
      )
      const added = yield* gated.enqueue("ok", {})
      yield* Deferred.await(entered).pipe(Effect.timeout("10 seconds"))
      // The item ran; its completion is being written: not idle yet, also once
      // the claimer has found nothing more (it looks again when whenIdle nudges
      // it; 200 ms is ample for that round: a pool that ignored the batch in
      // flight would be idle by then).
      const idle = yield* Effect.fork(worker.whenIdle)
      yield* Effect.sleep("200 millis")
      expect(idle.unsafePoll()).toBeNull()
      expect(yield* repo.get(added.id)).toMatchObject({ value: { state: "running" } })
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(idle).pipe(Effect.timeout("10 seconds"))
      expect(yield* repo.get(added.id)).toMatchObject({ value: { state: "done" } })
      expect((yield* worker.counters).completed).toBe(1)
    }).pipe(Effect.scoped))

  it.live("shutdown, in the start list's reverse: the prefetched items given back, then the grace and the running item given back, the row removed, Stopped last", () =>
    Effect.gen(function*() {
      const { poolScope, repo, started, worker } = yield* stuckPool({ grace: "100 millis" })
      // Subscribed for the test's scope: it outlives the pool's.
      const events = yield* worker.subscribeTo(["Released", "Stopped"])
      const [first, second, third] = yield* repo.enqueueMany([1, 2, 3].map((payload) => ({ kind: "stuck", payload })))
      yield* Deferred.await(started).pipe(Effect.timeout("10 seconds"))
      // One runs, two wait in the buffer (one claim took all three).
      expect(yield* worker.counters).toMatchObject({ running: 1, buffered: 2 })
      expect(yield* repo.listWorkers()).toHaveLength(1)
      yield* Scope.close(poolScope, Exit.void)
      const seen = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((e) =>
        e._tag === "Released" ? `Released ${e.claim.id}` : e._tag
      )
      expect(seen).toEqual([`Released ${second.id}`, `Released ${third.id}`, `Released ${first.id}`, "Stopped"])
      expect(yield* repo.listWorkers()).toEqual([])
      for (const item of [first, second, third]) expect(yield* repo.get(item.id)).toMatchObject({ value: { state: "waiting", attempts: 0 } })
    }).pipe(Effect.scoped))

  it.live("a cancel during the shutdown grace stops its run at once (the wake-up part, which carries the notices, stops after the grace)", () =>
    Effect.gen(function*() {
      // A grace and a lease far beyond the test's bounds: only the cancel
      // notice can end this run before the grace does (a renewal would come
      // after a third of the lease, 20 s).
      const { poolScope, repo, started, worker } = yield* stuckPool({ grace: "1 hour", lease: "1 minute" })
      const events = yield* worker.subscribeTo(["Released", "Cancelled", "Stopped"])
      const [running, buffered] = yield* repo.enqueueMany([1, 2].map((payload) => ({ kind: "stuck", payload })))
      yield* Deferred.await(started).pipe(Effect.timeout("10 seconds"))
      expect(yield* worker.counters).toMatchObject({ running: 1, buffered: 1 })
      const closing = yield* Effect.fork(Scope.close(poolScope, Exit.void))
      // The buffered item is given back as the slots' stop begins, just
      // before it waits out the grace for the running one: a latch, not a sleep.
      const given = yield* Queue.take(events).pipe(Effect.timeout("10 seconds"))
      expect(given._tag === "Released" && given.claim.id).toBe(buffered.id)
      expect(closing.unsafePoll()).toBeNull()
      expect(yield* repo.cancel([running.id])).toEqual(["cancelledRunning"])
      yield* Fiber.join(closing).pipe(Effect.timeout("10 seconds"))
      const seen = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((e) => e._tag)
      expect(seen).toEqual(["Cancelled", "Stopped"])
      expect(yield* repo.get(running.id)).toMatchObject({ value: { state: "cancelled" } })
    }).pipe(Effect.scoped))
})

/**
 * A pool of one slot over a fresh SQLite file, in a scope of its own (closing
 * it is the shutdown under test), whose "stuck" items run until interrupted;
 * `started` is done once the first has started.
 */
const stuckPool = (options: { readonly grace: Duration.DurationInput; readonly lease?: Duration.DurationInput }) =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(() => backend.fresh())
    const real = yield* Layer.build(repoLayer(url))
    const repo = yield* Effect.provide(QueueRepo.QueueRepo, real)
    const started = yield* Deferred.make<void>()
    const Stuck = Handler.make("stuck", {
      payload: Schema.Unknown,
      run: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
    })
    const poolScope = yield* Scope.make()
    const worker = yield* Worker.make({ handlers: [Stuck], concurrency: 1, poll: "1 minute", ...options }).pipe(
      Effect.provide(real),
      Scope.extend(poolScope)
    )
    return { poolScope, repo, started, worker }
  })
