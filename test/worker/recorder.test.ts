import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import type { Claim } from "../../src/Domain.js"
import type { Finished } from "../../src/internal/decide.js"
import { Budget } from "../../src/internal/worker/bounded.js"
import * as Recorder from "../../src/internal/worker/recorder.js"
import { PoolState } from "../../src/internal/worker/state.js"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { claimed, cleanup, countRows, freshRepo, makePublisher, row, withLogLines } from "../support/worker.js"

afterAll(cleanup)

const done = (claim: Claim): Finished => ({ claim, outcome: { _tag: "Done" }, durationMs: 1 })

/**
 * The repository with its completions counted and held at a gate: each
 * completeMany call reports its batch size on `entered`, then waits for
 * `gate` before it runs for real.
 */
const gated = (repo: QueueRepo.Service) =>
  Effect.gen(function*() {
    const sizes: Array<number> = []
    const gate = yield* Deferred.make<void>()
    const entered = yield* Deferred.make<void>()
    const spied: QueueRepo.Service = {
      ...repo,
      completeMany: (claims) =>
        Effect.zipRight(
          Effect.zipRight(Effect.sync(() => sizes.push(claims.length)), Deferred.succeed(entered, undefined)),
          Effect.zipRight(Deferred.await(gate), repo.completeMany(claims))
        )
    }
    return { sizes, gate, entered, repo: spied }
  })

const recorderOver = (repo: QueueRepo.Service, state: PoolState, written: () => void = () => {}) =>
  Effect.gen(function*() {
    const recorder = yield* Recorder.make({
      repo,
      counts: state.counts,
      publisher: yield* makePublisher(),
      wake: () => {},
      pollMs: 2000,
      checkIdle: written
    })
    yield* recorder.start(yield* Effect.scope)
    return recorder
  })

// The recorder (src/internal/worker/recorder.ts) on a real SQLite file.
describe("the recorder", () => {
  it.live("writes the outcomes ready together in one statement; those that come meanwhile go in the next", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const claims = yield* claimed(repo, 5)
      const spy = yield* gated(repo)
      const state = new PoolState(new Map())
      const allWritten = yield* Deferred.make<void>()
      const recorder = yield* recorderOver(spy.repo, state, () => {
        if (recorder.size === 0) Deferred.unsafeDone(allWritten, Effect.void)
      })
      yield* Effect.sync(() => {
        for (const claim of claims.slice(0, 3)) recorder.add(done(claim))
      })
      yield* Deferred.await(spy.entered)
      // The first batch is being written: these two wait for the next one.
      for (const claim of claims.slice(3)) recorder.add(done(claim))
      expect(recorder.size).toBe(5)
      expect(recorder.unrecorded().map((c) => c.id).sort()).toEqual(claims.map((c) => c.id).sort())
      yield* Deferred.succeed(spy.gate, undefined)
      yield* Deferred.await(allWritten).pipe(Effect.timeout("10 seconds"))
      expect(spy.sizes).toEqual([3, 2])
      expect(state.counts.completed).toBe(5)
      expect(recorder.unrecorded()).toEqual([])
      // Every item done (kept for the retention), none left running.
      expect(yield* countRows(sql, "done")).toBe(5)
      expect(yield* countRows(sql, "running")).toBe(0)
    })))

  it.live("stop writes what is pending, then the writer ends", () =>
    withLogLines((warnings) => Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const claims = yield* claimed(repo, 3)
      const state = new PoolState(new Map())
      const recorder = yield* recorderOver(repo, state)
      for (const claim of claims) recorder.add(done(claim))
      yield* recorder.stop(new Budget(10_000))
      expect(warnings).toEqual([])
      expect(recorder.size).toBe(0)
      expect(state.counts.completed).toBe(3)
      expect(yield* countRows(sql, "done")).toBe(3)
      expect(yield* countRows(sql, "running")).toBe(0)
    }))))

  it.live("a completion's result is written with it; one without stores none", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const [a, b] = yield* claimed(repo, 2)
      const state = new PoolState(new Map())
      const recorder = yield* recorderOver(repo, state)
      recorder.add({ claim: a, outcome: { _tag: "Done", result: { sent: "it's \"quoted\"\n" } }, durationMs: 1 })
      recorder.add(done(b))
      yield* recorder.stop(new Budget(10_000))
      expect(recorder.size).toBe(0)
      expect(yield* repo.get(a.id)).toMatchObject({ value: { state: "done", result: { sent: "it's \"quoted\"\n" } } })
      expect(yield* repo.get(b.id)).toMatchObject({ value: { state: "done", result: null } })
    })))

  it.live("stop gives up after its time: the writer is interrupted, the unwritten outcomes are counted and nothing is written", () =>
    withLogLines((warnings) => Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const [claim] = yield* claimed(repo, 1)
      const spy = yield* gated(repo)
      const state = new PoolState(new Map())
      const recorder = yield* recorderOver(spy.repo, state)
      recorder.add(done(claim))
      yield* Deferred.await(spy.entered)
      yield* recorder.stop(new Budget(50))
      expect(warnings).toEqual([
        "WARN: docket: 1 outcomes not recorded at shutdown; their items run again once their leases run out"
      ])
      // The gate never opened: the completion was never sent.
      expect((yield* row(sql, claim.id)).state).toBe("running")
      expect(state.counts.completed).toBe(0)
    }))))

  it.live("a refused statement keeps its outcomes and writes them again", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const claims = yield* claimed(repo, 2)
      yield* sql.unsafe(
        "CREATE TRIGGER refuse BEFORE UPDATE ON docket_items WHEN NEW.state = 'done' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
      )
      const state = new PoolState(new Map())
      const refused = yield* Deferred.make<void>()
      const allWritten = yield* Deferred.make<void>()
      const recorder = yield* recorderOver(repo, state, () => {
        Deferred.unsafeDone(recorder.size === 0 ? allWritten : refused, Effect.void)
      })
      for (const claim of claims) recorder.add(done(claim))
      yield* Deferred.await(refused).pipe(Effect.timeout("10 seconds"))
      expect(recorder.size).toBe(2)
      expect(yield* countRows(sql, "running")).toBe(2)
      yield* sql.unsafe("DROP TRIGGER refuse")
      yield* Deferred.await(allWritten).pipe(Effect.timeout("10 seconds"))
      expect(state.counts.completed).toBe(2)
      expect(yield* countRows(sql, "done")).toBe(2)
      expect(yield* countRows(sql, "running")).toBe(0)
    })))

  it.live("completions, failures and snoozes of one batch: a refused snooze statement writes again only the snoozes; a stale snooze changes nothing", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const [c0, c1, c2, c3, c4] = yield* claimed(repo, 5)
      // c4's claim goes stale: the item was given back and claimed again.
      expect(yield* repo.release(c4)).toBe("released")
      const [live] = yield* repo.claim({ worker: "w2", limit: 1, lease: "1 minute" })
      expect(live.id).toBe(c4.id)
      // Only a snooze's update (the one that counts a snooze) is refused.
      yield* sql.unsafe(
        "CREATE TRIGGER refuse BEFORE UPDATE ON docket_items WHEN NEW.snoozes > OLD.snoozes BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
      )
      const state = new PoolState(new Map())
      const refused = yield* Deferred.make<void>()
      const allWritten = yield* Deferred.make<void>()
      const recorder = yield* recorderOver(repo, state, () => {
        Deferred.unsafeDone(recorder.size === 0 ? allWritten : refused, Effect.void)
      })
      recorder.add(done(c0))
      recorder.add(done(c1))
      recorder.add({ claim: c2, outcome: { _tag: "Retry", error: "boom", delayMs: 60_000 }, durationMs: 1 })
      recorder.add({ claim: c3, outcome: { _tag: "Snooze", error: "Snooze: later", delayMs: 3_600_000 }, durationMs: 1 })
      recorder.add({ claim: c4, outcome: { _tag: "Snooze", error: "Snooze: late", delayMs: 0 }, durationMs: 1 })
      yield* Deferred.await(refused).pipe(Effect.timeout("10 seconds"))
      expect(recorder.unrecorded().map((c) => c.id)).toEqual([c3.id, c4.id])
      expect(state.counts).toMatchObject({ completed: 2, retried: 1, snoozed: 0 })
      expect((yield* row(sql, c3.id)).state).toBe("running")
      yield* sql.unsafe("DROP TRIGGER refuse")
      yield* Deferred.await(allWritten).pipe(Effect.timeout("10 seconds"))
      expect(state.counts).toMatchObject({ completed: 2, retried: 1, snoozed: 1, stale: 1 })
      expect(yield* repo.get(c3.id)).toMatchObject({ value: { state: "waiting", attempts: 0, snoozes: 1 } })
      expect(yield* row(sql, live.id)).toMatchObject({ state: "running", claimed_by: "w2" })
    })))

  it.live("release gives claims back unrun: waiting again, the attempt not counted", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const claims = yield* claimed(repo, 2)
      const state = new PoolState(new Map())
      const recorder = yield* recorderOver(repo, state)
      yield* recorder.release(claims)
      expect(state.counts.released).toBe(2)
      const item = yield* repo.get(claims[0].id)
      expect(item._tag === "Some" && item.value.state).toBe("waiting")
      expect(item._tag === "Some" && item.value.attempts).toBe(0)
      expect(yield* countRows(sql)).toBe(2)
    })))
})
