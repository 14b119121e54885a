/**
 * The slots (src/internal/worker/slots.ts) on a real SQLite file, with a real
 * executor and recorder: how many items run at once, kind limits, a claim too
 * old to start, a lost run's replacement, and the stop (the buffer given
 * back, the grace, then interruption). Runs are awaited through the pool's
 * own `finished` call, never by sleeping.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Queue, Schema } from "effect"
import type { Claim } from "../../src/Domain.js"
import * as Handler from "../../src/Handler.js"
import { Budget } from "../../src/internal/worker/bounded.js"
import * as Executor from "../../src/internal/worker/executor.js"
import * as Handlers from "../../src/internal/worker/handlers.js"
import { LateBound } from "../../src/internal/worker/part.js"
import * as Recorder from "../../src/internal/worker/recorder.js"
import * as Slots from "../../src/internal/worker/slots.js"
import { PoolState, type Running } from "../../src/internal/worker/state.js"
import { cleanup, freshRepo, makePublisher, row } from "../support/worker.js"

afterAll(cleanup)

/** One turn of the event loop. */
const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

interface Options {
  readonly concurrency: number
  readonly handlers: ReadonlyArray<Handler.Any>
  readonly kindLimits?: ReadonlyMap<string, number>
  readonly graceMs?: number
}

/** Slots over a fresh SQLite file; `ended` gets each run as it ends (the pool's `finished`). */
const setup = (options: Options) =>
  Effect.gen(function*() {
    const { repo, sql } = yield* freshRepo
    const scope = yield* Effect.scope
    const state = new PoolState(options.kindLimits ?? new Map())
    const publisher = yield* makePublisher(state)
    const recorder = yield* Recorder.make({ repo, counts: state.counts, publisher, wake: () => {}, pollMs: 60_000, checkIdle: () => {} })
    yield* recorder.start(scope)
    const ended = yield* Queue.unbounded<Running>()
    const hooks = new LateBound<{ readonly dispatch: () => void }>("the test's hooks")
    const executor = yield* Executor.make({
      worker: "w1",
      handlers: Handlers.table(options.handlers, Context.empty(), repo.maxResultBytes),
      counts: state.counts,
      publisher,
      recorder,
      traced: false,
      repo,
      leaseMs: 30_000,
      transactions: yield* Effect.makeSemaphore(4),
      finished: (entry) => {
        state.end(entry)
        hooks.get().dispatch()
        Queue.unsafeOffer(ended, entry)
      }
    })
    const slots = yield* Slots.make({
      state,
      executor,
      worker: "w1",
      leaseMs: 60_000,
      concurrency: options.concurrency,
      graceMs: options.graceMs ?? 10_000,
      release: (claims) => recorder.release(claims)
    })
    hooks.fill({ dispatch: slots.dispatch })
    yield* slots.start()
    /** Enqueues and claims items of these kinds, and hands them to the slots (claimed `agoMs` ago). */
    const give = (kinds: ReadonlyArray<string>, agoMs = 0) =>
      Effect.gen(function*() {
        yield* repo.enqueueMany(kinds.map((kind, payload) => ({ kind, payload })))
        const claims = yield* repo.claim({ worker: "w1", limit: kinds.length, lease: "1 minute" })
        for (const claim of claims) state.buffer.push(claim, performance.now() - agoMs)
        slots.dispatch()
        return claims
      })
    const endOne = Queue.take(ended).pipe(Effect.timeout("10 seconds"))
    const flush = recorder.stop(new Budget(10_000))
    const stateOf = (claim: Claim) => Effect.map(repo.get(claim.id), (o) => (o._tag === "Some" ? o.value : undefined))
    return { repo, sql, state, slots, give, endOne, flush, stateOf }
  })

/** A handler of `kind` whose runs wait at `gate`, counting how many wait at once. */
const gated = (kind: string, gate: Deferred.Deferred<void>, seen: { now: number; max: number; started: number }) =>
  Handler.make(kind, {
    payload: Schema.Unknown,
    run: () =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          seen.now++
          seen.started++
          seen.max = Math.max(seen.max, seen.now)
        }),
        () => Deferred.await(gate),
        () => Effect.sync(() => void seen.now--)
      )
  })

describe("the slots", () => {
  it.scopedLive("run the buffered items, never more at once than their number; parked slots wake when items come", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const seen = { now: 0, max: 0, started: 0 }
      const t = yield* setup({ concurrency: 2, handlers: [gated("job", gate, seen)] })
      const claims = yield* t.give(["job", "job", "job", "job", "job"])
      // Two start; the other three wait in the buffer.
      while (seen.started < 2) yield* Effect.yieldNow()
      expect([seen.now, t.state.running.size, t.state.buffer.size]).toEqual([2, 2, 3])
      yield* Deferred.succeed(gate, undefined)
      for (let i = 0; i < 5; i++) yield* t.endOne
      expect(seen).toEqual({ now: 0, max: 2, started: 5 })
      yield* t.flush
      for (const claim of claims) expect(yield* t.stateOf(claim)).toMatchObject({ state: "done" })
    }))

  it.scopedLive("an item whose kind is at its limit here waits in the buffer while another kind's item runs", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const a = { now: 0, max: 0, started: 0 }
      const b = { now: 0, max: 0, started: 0 }
      const t = yield* setup({
        concurrency: 3,
        handlers: [gated("a", gate, a), gated("b", gate, b)],
        kindLimits: new Map([["a", 1]])
      })
      yield* t.give(["a", "a", "b"])
      while (a.started + b.started < 2) yield* Effect.yieldNow()
      expect([a.now, b.now, t.state.buffer.size]).toEqual([1, 1, 1])
      yield* Deferred.succeed(gate, undefined)
      for (let i = 0; i < 3; i++) yield* t.endOne
      expect([a.max, a.started, b.started]).toEqual([1, 2, 1])
    }))

  it.scopedLive("a claim whose lease may have run out before a slot took it is not started, and nothing is written", () =>
    Effect.gen(function*() {
      let runs = 0
      const Count = Handler.make("job", { payload: Schema.Unknown, run: () => Effect.sync(() => void runs++) })
      const t = yield* setup({ concurrency: 1, handlers: [Count] })
      const [old] = yield* t.give(["job"], 60_000)
      const [fresh] = yield* t.give(["job"])
      yield* t.endOne
      yield* t.flush
      expect(runs).toBe(1)
      expect(t.state.counts.leaseLost).toBe(1)
      expect((yield* row(t.sql, old.id)).state).toBe("running")
      expect(yield* t.stateOf(fresh)).toMatchObject({ state: "done" })
    }))

  it.scopedLive("a run whose lease was lost is interrupted and records nothing; a new slot takes its place", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const seen = { now: 0, max: 0, started: 0 }
      const t = yield* setup({ concurrency: 1, handlers: [gated("job", gate, seen)] })
      const [lost] = yield* t.give(["job"])
      while (seen.started < 1) yield* Effect.yieldNow()
      const [entry] = [...t.state.running]
      entry.lost = true
      yield* t.slots.replace(entry)
      expect(yield* t.endOne).toBe(entry)
      expect(t.state.counts.leaseLost).toBe(1)
      // The new slot runs the next item.
      yield* Deferred.succeed(gate, undefined)
      const [next] = yield* t.give(["job"])
      yield* t.endOne
      yield* t.flush
      expect((yield* row(t.sql, lost.id)).state).toBe("running")
      expect(yield* t.stateOf(next)).toMatchObject({ state: "done" })
    }))

  it.scopedLive("a stop gives the prefetched items back and lets running items finish within the grace", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const seen = { now: 0, max: 0, started: 0 }
      const t = yield* setup({ concurrency: 1, handlers: [gated("job", gate, seen)] })
      const [running, buffered] = yield* t.give(["job", "job"])
      while (seen.started < 1) yield* Effect.yieldNow()
      // The claimer stops first (no item starts from now on).
      t.state.setMode("stopping")
      const stop = yield* Effect.fork(t.slots.stop(new Budget(10_000)))
      // The buffered item is given back while the running one still runs.
      let given = yield* t.stateOf(buffered)
      for (let i = 0; i < 1000 && given?.state !== "waiting"; i++) {
        yield* turn // SQLite answers synchronously: the stop's fiber needs the event loop to move
        given = yield* t.stateOf(buffered)
      }
      expect(given).toMatchObject({ state: "waiting", attempts: 0 })
      expect([seen.now, stop.unsafePoll()]).toEqual([1, null])
      yield* Deferred.succeed(gate, undefined)
      yield* stop.await
      yield* t.flush
      expect(yield* t.stateOf(running)).toMatchObject({ state: "done" })
      expect(seen.started).toBe(1)
      expect(t.state.counts.released).toBe(1)
    }))

  it.scopedLive("past the grace, running items are interrupted and given back (attempt not counted), their signal aborted", () =>
    Effect.gen(function*() {
      const aborted = yield* Deferred.make<void>()
      const Stuck = Handler.make("job", {
        payload: Schema.Unknown,
        run: (_, job) =>
          Effect.zipRight(
            Effect.sync(() => job.signal.addEventListener("abort", () => Deferred.unsafeDone(aborted, Effect.void))),
            Effect.never
          )
      })
      const t = yield* setup({ concurrency: 1, handlers: [Stuck], graceMs: 50 })
      const [stuck] = yield* t.give(["job"])
      while (t.state.running.size < 1) yield* Effect.yieldNow()
      t.state.setMode("stopping")
      yield* t.slots.stop(new Budget(10_000))
      yield* Deferred.await(aborted).pipe(Effect.timeout("10 seconds"))
      yield* t.endOne
      expect(yield* t.stateOf(stuck)).toMatchObject({ state: "waiting", attempts: 0 })
      expect(t.state.counts.released).toBe(1)
    }))
})
