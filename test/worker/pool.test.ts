import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schema } from "effect"
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
})
