/**
 * The pruner (src/internal/worker/pruner.ts) on a real SQLite file: a pass
 * repeats a full batch, at most MAX_ROUNDS statements of a state, counts what
 * it deleted, a backlog brings the next pass a pause later instead of an
 * interval later (TestClock), and a failed prune is reported (StorageFailed),
 * not thrown.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Queue, TestClock } from "effect"
import * as Pruner from "../../src/internal/worker/pruner.js"
import { PoolState } from "../../src/internal/worker/state.js"
import { PRUNE_BATCH } from "../../src/internal/store/history.js"
import { cleanup, countRows, freshRepo, makePublisher } from "../support/worker.js"

afterAll(cleanup)

describe("the pruner", () => {
  it.live("a pass repeats while batches come back full, at most MAX_ROUNDS statements; the next pass takes the rest", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const n = PRUNE_BATCH * Pruner.MAX_ROUNDS + 500
      yield* repo.enqueueMany(Array.from({ length: n }, (_, i) => ({ kind: "job", payload: i })))
      for (let left = n; left > 0; left -= 5000) {
        yield* repo.completeMany(yield* repo.claim({ worker: "w", limit: Math.min(left, 5000), lease: "1 minute" }))
      }
      // Finished two days ago: past the default retention of done items (24 h).
      yield* sql.unsafe("UPDATE docket_items SET finished_at = finished_at - 172800000")
      yield* repo.enqueue("job", "young")
      const young = (yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute" }))[0]
      yield* repo.complete(young)
      const state = new PoolState(new Map())
      const deps = { repo, intervalMs: 60_000, counts: state.counts, publisher: yield* makePublisher() }
      expect(yield* Pruner.pass(deps)).toBe(PRUNE_BATCH * Pruner.MAX_ROUNDS)
      expect(state.counts.pruned).toBe(PRUNE_BATCH * Pruner.MAX_ROUNDS)
      expect(yield* Pruner.pass(deps)).toBe(500)
      expect(yield* Pruner.pass(deps)).toBe(0)
      expect(state.counts.pruned).toBe(n)
      // Only the young done item is left.
      expect(yield* countRows(sql)).toBe(1)
      expect(yield* countRows(sql, "done")).toBe(1)
    })), 60_000)

  it.effect("a pass that ends on a full batch brings the next one a pause later, not an interval later", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const n = PRUNE_BATCH * Pruner.MAX_ROUNDS + 500
      yield* repo.enqueueMany(Array.from({ length: n }, (_, i) => ({ kind: "job", payload: i })))
      for (let left = n; left > 0; left -= 5000) {
        yield* repo.completeMany(yield* repo.claim({ worker: "w", limit: Math.min(left, 5000), lease: "1 minute" }))
      }
      yield* sql.unsafe("UPDATE docket_items SET finished_at = finished_at - 172800000")
      const state = new PoolState(new Map())
      const deps = { repo, intervalMs: 60_000, counts: state.counts, publisher: yield* makePublisher() }
      // Waits (real time, bounded) for the forked pass's statements to end.
      const prunedReaches = (count: number) =>
        Effect.gen(function*() {
          const deadline = Date.now() + 30_000
          while (state.counts.pruned < count && Date.now() < deadline) {
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
          }
          return state.counts.pruned
        })
      const fiber = yield* Effect.fork(Pruner.run(deps))
      yield* TestClock.adjust("10 seconds") // the first pass comes within min(interval, 10 s)
      expect(yield* prunedReaches(PRUNE_BATCH * Pruner.MAX_ROUNDS)).toBe(PRUNE_BATCH * Pruner.MAX_ROUNDS)
      // A backlog is left: the next pass a pause later takes it (an interval later it would still be there).
      yield* TestClock.adjust(Pruner.BACKLOG_PAUSE_MS)
      expect(yield* prunedReaches(n)).toBe(n)
      expect(yield* countRows(sql, "done")).toBe(0)
      yield* Fiber.interrupt(fiber)
    })), 60_000)

  it.live("a failed prune is reported as StorageFailed and the pass ends with nothing counted", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const publisher = yield* makePublisher()
      const events = yield* publisher.subscribe
      yield* sql.unsafe("DROP TABLE docket_items")
      const state = new PoolState(new Map())
      expect(yield* Pruner.pass({ repo, intervalMs: 60_000, counts: state.counts, publisher })).toBe(0)
      expect(state.counts.pruned).toBe(0)
      expect(yield* Queue.take(events)).toMatchObject({ _tag: "StorageFailed", operation: "prune" })
    })))
})
