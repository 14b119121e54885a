/**
 * The claimer (src/internal/worker/claimer.ts) on a real SQLite file, with a
 * real wake-up signal and recorder: what a round claims, the mode each claim
 * leaves, the prefetch's pause, the kinds it asks for, and its stop. Rounds
 * are awaited through the claimer's own calls (dispatch, checkIdle), never by
 * sleeping.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Queue } from "effect"
import type { Claim } from "../../src/Domain.js"
import { StorageError } from "../../src/Errors.js"
import { Signal } from "../../src/internal/signal.js"
import { Budget } from "../../src/internal/worker/bounded.js"
import * as Claimer from "../../src/internal/worker/claimer.js"
import { Prefetch } from "../../src/internal/worker/prefetch.js"
import * as Recorder from "../../src/internal/worker/recorder.js"
import { PoolState } from "../../src/internal/worker/state.js"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { cleanup, freshRepo, makePublisher, runOf } from "../support/worker.js"

afterAll(cleanup)

interface Options {
  readonly concurrency: number
  readonly prefetch: number
  readonly holdMs?: number
  readonly kinds?: ReadonlyArray<string>
  readonly kindLimits?: ReadonlyMap<string, number>
  /** Wraps the repository the claimer claims through. */
  readonly repo?: (repo: QueueRepo.Service) => QueueRepo.Service
  /**
   * The claimer's clock, moved by the test; with it, each of the claimer's
   * waits is also a call ("wait") and ends only at a notify (no timer).
   */
  readonly clock?: { now: number }
  /** Free slots start the buffered items as they are dispatched (as slots.ts would). */
  readonly startOnDispatch?: boolean
}

/**
 * A claimer over a fresh SQLite file. `calls` gets "dispatch" (with the
 * buffer's size) when a claim handed items to the slots, and "idle" when a
 * claim found fewer than it asked for.
 */
const setup = (options: Options) =>
  Effect.gen(function*() {
    const { repo, sql } = yield* freshRepo
    const state = new PoolState(options.kindLimits ?? new Map())
    const publisher = yield* makePublisher(state)
    const recorder = yield* Recorder.make({ repo, counts: state.counts, publisher, wake: () => {}, pollMs: 60_000, checkIdle: () => {} })
    const calls = yield* Queue.unbounded<string>()
    const holdMs = options.holdMs ?? 60_000
    const { clock } = options
    const prefetch = new Prefetch(options.prefetch, options.concurrency, holdMs, clock?.now ?? performance.now())
    const signal = new Signal()
    const wakeup = clock === undefined ? signal : {
      notify: signal.notify,
      pending: signal.pending,
      wait: () => Effect.zipRight(Queue.offer(calls, "wait"), signal.wait(Infinity))
    }
    const claimer = yield* Claimer.make({
      repo: options.repo?.(repo) ?? repo,
      state,
      prefetch,
      wakeup,
      now: clock === undefined ? undefined : () => clock.now,
      publisher,
      worker: "w1",
      concurrency: options.concurrency,
      leaseMs: 60_000,
      pollMs: 60_000,
      holdMs,
      handlerKinds: options.kinds ?? ["job"],
      handledOnly: true,
      maxAttemptsByKind: new Map(),
      release: (claims) => recorder.release(claims),
      dispatch: () => {
        Queue.unsafeOffer(calls, `dispatch ${state.buffer.size}`)
        if (options.startOnDispatch === true) {
          while (state.buffer.size > 0 && state.running.size < options.concurrency) runNext(state)
        }
      },
      checkIdle: () => Queue.unsafeOffer(calls, "idle")
    })
    const next = Queue.take(calls).pipe(Effect.timeout("10 seconds"))
    return { repo, sql, state, prefetch, claimer, next, wakeup }
  })

/** A slot takes the next buffered item and runs it (as slots.ts would). */
const runNext = (state: PoolState) => {
  const taken = state.takeOne()
  if (taken === undefined) throw new Error("nothing buffered")
  return state.begin(taken.claim, runOf(taken.claim, 0).slot, 0)
}

/** The ids of the buffered items, in order (left buffered). */
const bufferedIds = (state: PoolState) => {
  const all = state.buffer.takeAll()
  for (const claim of all) state.buffer.push(claim, 0)
  return all.map((c) => c.id)
}

describe("the claimer", () => {
  it.scopedLive("claims free slots (plus the prefetch); all it asked for keeps it claiming, fewer is drained, none is empty", () =>
    Effect.gen(function*() {
      const t = yield* setup({ concurrency: 2, prefetch: 0 })
      yield* t.repo.enqueueMany([1, 2, 3].map((payload) => ({ kind: "job", payload })))
      yield* t.claimer.start(yield* Effect.scope)
      expect(yield* t.next).toBe("dispatch 2")
      expect(t.state.mode).toBe("claiming")
      expect(t.state.counts.claimed).toBe(2)
      // Both start; a slot frees with the buffer empty: the claimer is woken, and one slot owes it a turn.
      t.state.buffer.takeAll()
      t.claimer.slotFreed()
      expect(t.state.yieldForClaimer).toBe(true)
      expect(yield* t.next).toBe("dispatch 1")
      expect(yield* t.next).toBe("idle")
      expect(t.state.mode).toBe("drained")
      t.state.buffer.takeAll()
      t.claimer.slotFreed()
      expect(yield* t.next).toBe("idle")
      expect(t.state.mode).toBe("empty")
      expect(t.state.counts.claimed).toBe(3)
      yield* t.claimer.stop(new Budget(10_000))
      expect(t.state.mode).toBe("stopped")
    }))

  it.scopedLive("claims only the kinds handled here, less those at their limit in this process", () =>
    Effect.gen(function*() {
      const t = yield* setup({ concurrency: 4, prefetch: 0, kinds: ["a", "b"], kindLimits: new Map([["a", 1]]) })
      yield* t.repo.enqueueMany([{ kind: "a", payload: 1 }, { kind: "b", payload: 2 }, { kind: "c", payload: 3 }])
      // An item of "a" runs here already: "a" is at its limit.
      t.state.begin({ id: 0, kind: "a" } as unknown as Claim, runOf({ id: 0, kind: "a" } as unknown as Claim, 0).slot, 0)
      yield* t.claimer.start(yield* Effect.scope)
      expect(yield* t.next).toBe("dispatch 1")
      expect(t.state.buffer.takeAll().map((c) => c.kind)).toEqual(["b"])
      yield* t.claimer.stop(new Budget(10_000))
    }))

  it.scopedLive("prefetched items that waited past the hold for a busy slot are given back, and the prefetch pauses until a slot frees", () =>
    Effect.gen(function*() {
      const clock = { now: 0 }
      const t = yield* setup({ concurrency: 1, prefetch: 4, holdMs: 50, clock })
      yield* t.repo.enqueueMany(Array.from({ length: 10 }, (_, payload) => ({ kind: "job", payload })))
      yield* t.claimer.start(yield* Effect.scope)
      // Starving at first: the prefetch grows (1 -> 4), so one slot plus four.
      expect(yield* t.next).toBe("dispatch 5")
      expect(yield* t.next).toBe("wait")
      expect(t.prefetch.paused).toBe(false)
      // The slot takes one; the other four wait for it, past the hold: they go back.
      const run = runNext(t.state)
      clock.now += 51
      t.wakeup.notify()
      expect(yield* t.next).toBe("wait")
      expect(t.prefetch.paused).toBe(true)
      expect(t.state.counts.released).toBe(4)
      expect(t.state.buffer.size).toBe(0)
      // The slot frees: the prefetch resumes, and the claimer claims for the slot and the prefetch again.
      t.state.end(run)
      t.claimer.slotFreed()
      expect(t.prefetch.paused).toBe(false)
      expect(yield* t.next).toBe("dispatch 5")
      yield* t.claimer.stop(new Budget(10_000))
    }))

  it.scopedLive("an item a free slot takes next is not given back, however long it waited; the hold is for items no slot is free for", () =>
    Effect.gen(function*() {
      const clock = { now: 0 }
      const t = yield* setup({ concurrency: 3, prefetch: 0, holdMs: 1000, clock })
      const ids = (yield* t.repo.enqueueMany([1, 2, 3, 4].map((payload) => ({ kind: "job", payload })))).map((r) => r.id)
      yield* t.claimer.start(yield* Effect.scope)
      expect(yield* t.next).toBe("dispatch 3")
      expect(yield* t.next).toBe("wait")
      // One slot takes its item. The two others are free but have not had
      // their turn yet (a loaded machine: the event loop's turn, or the turn
      // a finishing slot gives the claimer first): their items stay, and
      // parked slots are woken for them.
      runNext(t.state)
      clock.now += 5000
      t.wakeup.notify()
      expect(yield* t.next).toBe("dispatch 2")
      expect(yield* t.next).toBe("wait")
      expect(t.state.counts.released).toBe(0)
      expect(t.prefetch.paused).toBe(false)
      expect(bufferedIds(t.state)).toEqual([ids[1], ids[2]])
      // Another slot busy (with an item claimed elsewhere): one slot is free,
      // for the first of the two; the second has no slot and goes back.
      t.state.begin({ id: 0, kind: "job" } as unknown as Claim, runOf({ id: 0, kind: "job" } as unknown as Claim, 0).slot, 0)
      t.wakeup.notify()
      expect(yield* t.next).toBe("dispatch 1")
      expect(yield* t.next).toBe("wait")
      expect(t.state.counts.released).toBe(1)
      expect(t.prefetch.paused).toBe(true)
      expect(bufferedIds(t.state)).toEqual([ids[1]])
      yield* t.claimer.stop(new Budget(10_000))
    }))

  it.scopedLive("the hold counts from when the claim came back, not from when it was sent (a claim that waited on a lock)", () =>
    Effect.gen(function*() {
      const clock = { now: 0 }
      const t = yield* setup({
        concurrency: 1,
        prefetch: 4,
        holdMs: 1000,
        clock,
        // The claim waits 5 s (SQLite's busy timeout, a slow database) before it returns.
        repo: (repo) => ({ ...repo, claim: (options) => Effect.zipRight(Effect.sync(() => (clock.now += 5000)), repo.claim(options)) })
      })
      yield* t.repo.enqueueMany(Array.from({ length: 10 }, (_, payload) => ({ kind: "job", payload })))
      yield* t.claimer.start(yield* Effect.scope)
      expect(yield* t.next).toBe("dispatch 5")
      expect(yield* t.next).toBe("wait")
      // The slot is busy: the four others wait for it, from now.
      runNext(t.state)
      t.wakeup.notify()
      expect(yield* t.next).toBe("wait")
      expect(t.state.counts.released).toBe(0)
      expect(t.state.buffer.size).toBe(4)
      // A hold later they go back.
      clock.now += 1001
      t.wakeup.notify()
      expect(yield* t.next).toBe("wait")
      expect(t.state.counts.released).toBe(4)
      expect(t.state.buffer.size).toBe(0)
      yield* t.claimer.stop(new Budget(10_000))
    }))

  it.scopedLive("a stop lets the claim in flight end first (its items are kept for the slots' stop), and no claim follows", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      let claims = 0
      const t = yield* setup({
        concurrency: 2,
        prefetch: 0,
        repo: (repo) => ({
          ...repo,
          claim: (options) =>
            Effect.zipRight(
              Effect.zipRight(Effect.sync(() => claims++), Deferred.succeed(entered, undefined)),
              Effect.zipRight(Deferred.await(gate), repo.claim(options))
            )
        })
      })
      yield* t.repo.enqueueMany([1, 2, 3].map((payload) => ({ kind: "job", payload })))
      yield* t.claimer.start(yield* Effect.scope)
      yield* Deferred.await(entered)
      const stop = yield* Effect.fork(t.claimer.stop(new Budget(10_000)))
      yield* Effect.yieldNow()
      expect(t.state.mode).toBe("stopping")
      expect(stop.unsafePoll()).toBeNull()
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(stop)
      expect(t.state.mode).toBe("stopped")
      expect(claims).toBe(1)
      expect(t.state.buffer.size).toBe(2)
    }))

  it.scopedLive("a claim that does not end within the stop's budget is interrupted; the claimer is stopped all the same", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const t = yield* setup({
        concurrency: 2,
        prefetch: 0,
        repo: (repo) => ({ ...repo, claim: () => Effect.zipRight(Deferred.succeed(entered, undefined), Effect.never) })
      })
      yield* t.claimer.start(yield* Effect.scope)
      yield* Deferred.await(entered)
      const started = performance.now()
      yield* t.claimer.stop(new Budget(100))
      expect(performance.now() - started).toBeLessThan(5_000)
      expect(t.state.mode).toBe("stopped")
    }))
  it.scopedLive("a failed claim is tried again after a moment, not after the poll, also when the next due time cannot be read", () =>
    Effect.gen(function*() {
      const failures = { claims: 0 }
      const failing = (name: string) => new StorageError({ operation: name, cause: new Error("canceling statement due to statement timeout") })
      const t = yield* setup({
        concurrency: 2,
        prefetch: 0,
        // The first two claims fail; the next due time never reads (a table locked past the statement timeout).
        repo: (repo) => ({
          ...repo,
          claim: (options) => failures.claims++ < 2 ? Effect.fail(failing("claim")) : repo.claim(options),
          nextDueIn: Effect.fail(failing("nextDueIn"))
        })
      })
      yield* t.repo.enqueueMany([1, 2].map((payload) => ({ kind: "job", payload })))
      yield* t.claimer.start(yield* Effect.scope)
      // The poll is a minute; `next` waits 10 s at most.
      expect(yield* t.next).toBe("dispatch 2")
      expect(failures.claims).toBe(3)
    }))

  // The pool's poll is a minute, and `next` waits 10 s at most: only the
  // claimer's own rule claims the second item in time. Before it, a claim
  // that came back short with items (`drained`) after a full one slept to the
  // poll: only an empty claim claimed again, and the write's wake-up (for a
  // claimer whose last claim was short) found the mode still `claiming`.
  for (const shape of ["short with items", "empty"] as const) {
    it.scopedLive(`a ${shape} claim overlapped by a written outcome claims again at once, not at the poll`, () =>
      Effect.gen(function*() {
        // Run during the next claim, after its read: an outcome written (as the
        // recorder's batch would), which freed an item (as a finished item frees
        // its ordered group's next one).
        const during: { write: Effect.Effect<void> | undefined } = { write: undefined }
        const t = yield* setup({
          concurrency: 2,
          prefetch: 0,
          startOnDispatch: true,
          repo: (repo) => ({
            ...repo,
            claim: (options) =>
              Effect.tap(repo.claim(options), () => {
                const write = during.write
                during.write = undefined
                return write ?? Effect.void
              })
          })
        })
        yield* t.repo.enqueueMany([1, 2].map((payload) => ({ kind: "job", payload })))
        yield* t.claimer.start(yield* Effect.scope)
        expect(yield* t.next).toBe("dispatch 2")
        expect(t.state.mode).toBe("claiming")
        if (shape === "short with items") yield* t.repo.enqueueMany([{ kind: "job", payload: 3 }])
        during.write = Effect.zipRight(
          Effect.sync(t.claimer.wrote),
          Effect.orDie(t.repo.enqueueMany([{ kind: "job", payload: 4 }]))
        )
        for (const run of [...t.state.running]) t.state.end(run)
        t.claimer.slotFreed()
        if (shape === "short with items") expect(yield* t.next).toBe("dispatch 1")
        // Claimed again: the freed item, not a sleep until the poll.
        expect(yield* t.next).toBe("dispatch 1")
        const running = [...t.state.running].map((r) => Number(r.claim.payloadJson))
        expect(running.sort()).toEqual(shape === "short with items" ? [3, 4] : [4])
      }))
  }

  it.scopedLive("an outcome written after a short claim wakes the claimer; the pool is not idle until it claimed after it", () =>
    Effect.gen(function*() {
      const t = yield* setup({ concurrency: 2, prefetch: 0 })
      yield* t.repo.enqueueMany([{ kind: "job", payload: 1 }])
      yield* t.claimer.start(yield* Effect.scope)
      expect(yield* t.next).toBe("dispatch 1")
      expect(yield* t.next).toBe("idle")
      expect(t.state.mode).toBe("drained")
      t.state.end(runNext(t.state))
      expect(t.state.quiet()).toBe(true)
      yield* t.repo.enqueueMany([{ kind: "job", payload: 2 }])
      // Written: a claim is owed (what the write freed is claimed next), so not idle.
      t.claimer.wrote()
      expect(t.state.quiet()).toBe(false)
      expect(yield* t.next).toBe("dispatch 1")
      expect(yield* t.next).toBe("idle")
      t.state.end(runNext(t.state))
      expect(t.state.quiet()).toBe(true)
      // A wake-up the claimer has not taken yet (it came during a round): it looks again at once, so not idle.
      expect(t.state.quiet(true)).toBe(false)
    }))
})
