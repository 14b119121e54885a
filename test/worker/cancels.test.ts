import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import type { Claim } from "../../src/Domain.js"
import * as Cancels from "../../src/internal/worker/cancels.js"
import { PoolState, type Running, type Slot } from "../../src/internal/worker/state.js"
import { claimed, cleanup, freshRepo } from "../support/worker.js"

afterAll(cleanup)

const slot = (): Slot => ({ fiber: undefined, current: undefined, controller: undefined })

// The cancels part (src/internal/worker/cancels.ts) on a real SQLite file:
// notices name items; only items stored as cancelled are stopped.
describe("the cancels part", () => {
  it.live("a notice stops the runs and drops the buffered claims of cancelled items; an item not cancelled is left running", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const [a, b, c, d] = yield* claimed(repo, 4)
      const state = new PoolState(new Map())
      const [runA, runB, runD] = [a, b, d].map((claim) => state.begin(claim, slot(), performance.now() + 60_000))
      state.buffer.push(c, performance.now())
      expect(yield* repo.cancel([a.id, c.id], { reason: "not wanted" })).toEqual(["cancelledRunning", "cancelledRunning"])
      const stopped: Array<Running> = []
      const dropped: Array<[Claim, string]> = []
      const handled = yield* Deferred.make<void>()
      const cancels = yield* Cancels.make({
        repo,
        state,
        stop: (entry) =>
          Effect.sync(() => {
            stopped.push(entry)
            if (entry === runD) Deferred.unsafeDone(handled, Effect.void)
          }),
        dropped: (claim, error) => Effect.sync(() => void dropped.push([claim, error]))
      })
      const fiber = yield* Effect.fork(cancels.run)
      // b is named but not cancelled (a notice is only a hint): left alone.
      cancels.notice([a.id, b.id, c.id])
      // Then d is cancelled and noticed: once it is stopped, the first notice was handled too.
      expect(yield* repo.cancel([d.id])).toEqual(["cancelledRunning"])
      cancels.notice([d.id, b.id])
      yield* Deferred.await(handled).pipe(Effect.timeout("5 seconds"))
      yield* Fiber.interrupt(fiber)
      expect(stopped).toEqual([runA, runD])
      expect([runA.lost, runA.cancelled]).toEqual([true, "Cancelled: not wanted"])
      expect([runD.lost, runD.cancelled]).toEqual([true, "Cancelled"])
      expect([runB.lost, runB.cancelled]).toEqual([false, undefined])
      expect(dropped).toEqual([[c, "Cancelled: not wanted"]])
      expect(state.buffer.size).toBe(0)
    })))

  it.live("a notice of items this pool does not hold reads nothing", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo } = yield* freshRepo
      let reads = 0
      const read: Array<ReadonlyArray<number>> = []
      const counted = {
        ...repo,
        get: (id: number) => Effect.zipRight(Effect.sync(() => reads++), repo.get(id)),
        getMany: (ids: ReadonlyArray<number>) => Effect.zipRight(Effect.sync(() => (reads++, read.push(ids))), repo.getMany(ids))
      }
      const [a] = yield* claimed(repo, 1)
      const state = new PoolState(new Map())
      const run = state.begin(a, slot(), performance.now() + 60_000)
      const handled = yield* Deferred.make<void>()
      const cancels = yield* Cancels.make({
        repo: counted,
        state,
        stop: () => Deferred.succeed(handled, undefined),
        dropped: () => Effect.void
      })
      const fiber = yield* Effect.fork(cancels.run)
      cancels.notice([a.id + 100, a.id + 200])
      yield* repo.cancel([a.id])
      cancels.notice([a.id])
      yield* Deferred.await(handled).pipe(Effect.timeout("5 seconds"))
      yield* Fiber.interrupt(fiber)
      // One read: a's (the ids it does not hold were never read).
      expect(reads).toBe(1)
      expect(read).toEqual([[a.id]])
      expect(run.cancelled).toBe("Cancelled")
    })))
})
