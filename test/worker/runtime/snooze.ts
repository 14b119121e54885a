/**
 * Part of the runtime suite (run from ./suite.ts on every backend): the
 * Snooze outcome through a worker pool. Time is moved by editing rows
 * (makeDue) and waking the pool, or by delays of 0; never by sleeping.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, type Duration, Effect, Exit, Layer, Option, Schema } from "effect"
import { InvalidInput } from "../../../src/Errors.js"
import { Backoff, Docket, Handler, QueueRepo, Retry, Snooze, Worker } from "../../../src/index.js"
import type { Backend } from "../../support/db.js"
import { makeDue, repoLayer } from "../../support/db.js"
import { waitForCount, waitForEvent } from "../../support/events.js"
import { dbNow, expectAround, withPool } from "../../support/harness.js"

const fast = Backoff.constant("20 millis")
const HOUR = 3_600_000

const item = (id: number) =>
  Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.get(id)).pipe(Effect.map(Option.getOrUndefined))

const snoozeLimits = (backend: Backend) => {
  it.live("a handler snoozes twice, then succeeds: its attempt stays 1 (on its last attempt too), each snooze counted and due after its delay", () => {
    const runs: Array<readonly [number, number]> = []
    const Poll = Handler.make("export.poll", {
      payload: Schema.Unknown,
      // One attempt: were a snooze counted as one, the second run would be dead (LeaseExpired).
      maxAttempts: 1,
      run: (_, job) =>
        Effect.suspend(() => {
          runs.push([job.attempt, job.snoozes])
          return job.snoozes < 2 ? Effect.fail(new Snooze({ delay: "1 hour", reason: `not ready (${job.snoozes})` })) : Effect.void
        })
    })
    return withPool(backend, { handlers: [Poll] }, () =>
      Effect.gen(function*() {
        const worker = yield* Worker.Worker
        const events = yield* worker.subscribe
        let before = yield* dbNow
        const added = yield* Docket.client(Poll).enqueue(null)
        for (const n of [1, 2]) {
          const { event } = yield* waitForEvent(events, (e) => e._tag === "Snoozed" && e.claim.id === added.id)
          const after = yield* dbNow
          expect(event).toMatchObject({ reason: `Snooze: not ready (${n - 1})`, delayMs: HOUR })
          const stored = yield* item(added.id)
          expect(stored).toMatchObject({ state: "waiting", attempts: 0, snoozes: n, claimedBy: null, leaseUntil: null })
          expectAround(stored!.runAt, before + HOUR, after + HOUR, 50)
          // The hour has passed.
          before = yield* dbNow
          yield* makeDue(added.id)
          yield* worker.wake
        }
        yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
        expect(runs).toEqual([[1, 0], [1, 1], [1, 2]])
        expect(yield* item(added.id)).toMatchObject({ state: "done", attempts: 1, snoozes: 2, errors: [] })
        expect(yield* worker.counters).toMatchObject({ snoozed: 2, completed: 1, retried: 0, dead: 0 })
      }))
  })

  it.live("past its kind's maxSnoozes an item is dead with SnoozeLimit; maxSnoozes 0: at its first snooze", () => {
    const Stuck = Handler.make("stuck", {
      payload: Schema.Unknown,
      maxSnoozes: 2,
      run: () => Effect.fail(new Snooze({ delay: 0, reason: "still waiting" }))
    })
    const Never = Handler.make("never", { payload: Schema.Unknown, maxSnoozes: 0, run: () => Effect.fail(new Snooze({ delay: 0 })) })
    return withPool(backend, { handlers: [Stuck, Never] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const stuck = yield* Docket.client(Stuck).enqueue(1)
        const never = yield* Docket.client(Never).enqueue(2)
        const dead = yield* waitForCount(events, (e) => e._tag === "Dead", 2)
        expect(dead.flatMap((e) => (e._tag === "Dead" ? [e.claim.id] : [])).sort()).toEqual([stuck.id, never.id].sort())
        expect(yield* item(stuck.id)).toMatchObject({
          state: "dead",
          attempts: 1,
          snoozes: 2,
          lastError: "SnoozeLimit: snoozed 2 times (maxSnoozes 2); the last: Snooze: still waiting"
        })
        expect(yield* item(never.id)).toMatchObject({
          state: "dead",
          attempts: 1,
          snoozes: 0,
          lastError: "SnoozeLimit: snoozed 0 times (maxSnoozes 0); the last: Snooze: snoozed for 0ms"
        })
        expect(yield* (yield* Worker.Worker).counters).toMatchObject({ snoozed: 2, dead: 2 })
      }))
  })
}

const snoozeDelaysAndPromises = (backend: Backend) => {
  it.live("a snooze or retry delay out of range is an ordinary failure: retried with the kind's backoff, the reason recorded, the pool unharmed", () => {
    const BadSnooze = Handler.make("bad.snooze", {
      payload: Schema.Unknown,
      maxAttempts: 2,
      backoff: fast,
      run: () => Effect.fail(new Snooze({ delay: -1 }))
    })
    const BadRetry = Handler.make("bad.retry", {
      payload: Schema.Unknown,
      maxAttempts: 2,
      backoff: fast,
      run: (payload) => Effect.fail(new Retry({ reason: "later", delay: payload as Duration.DurationInput }))
    })
    const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
    return withPool(backend, { handlers: [BadSnooze, BadRetry, Ok] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const snooze = yield* Docket.client(BadSnooze).enqueue(null)
        const never = yield* Docket.client(BadRetry).enqueue("soon")
        const tooLong = yield* Docket.client(BadRetry).enqueue(1e15)
        yield* waitForCount(events, (e) => e._tag === "Dead", 3)
        const invalidSnooze = "InvalidSnooze: the delay must be from 0 to 3153600000000 milliseconds (got -1)"
        expect(yield* item(snooze.id)).toMatchObject({ state: "dead", attempts: 2, snoozes: 0, lastError: invalidSnooze })
        expect((yield* item(never.id))?.lastError).toBe(
          `Retry: later (its delay was ignored: must be a duration or a number of milliseconds (got "soon"))`
        )
        expect((yield* item(tooLong.id))?.lastError).toBe(
          "Retry: later (its delay was ignored: must be from 0 to 3153600000000 milliseconds (got 1000000000000000))"
        )
        const ok = yield* Docket.client(Ok).enqueue(null)
        yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === ok.id)
        expect(yield* (yield* Worker.Worker).counters).toMatchObject({ retried: 3, dead: 3, snoozed: 0, completed: 1 })
      }))
  })

  it.live("Handler.fromPromise: a thrown Snooze snoozes (plain functions and task files)", () => {
    const runs: Array<number> = []
    const Plain = Handler.fromPromise("plain", async (_, job) => {
      runs.push(job.snoozes)
      if (job.snoozes === 0) throw new Snooze({ delay: 0, reason: "first" })
    })
    return withPool(backend, { handlers: [Plain] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const repo = yield* QueueRepo.QueueRepo
        const added = yield* repo.enqueue("plain", {})
        const { seen } = yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
        expect(seen.filter((e) => e._tag === "Snoozed").map((e) => e._tag === "Snoozed" && e.reason)).toEqual(["Snooze: first"])
        expect(runs).toEqual([0, 1])
      }))
  })

  it.live("a maxSnoozes that is not an integer from 0 to 1,000,000 stops the pool from starting (InvalidInput on maxSnoozes)", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      for (const maxSnoozes of [-1, 1.5, Number.NaN, 1_000_001]) {
        const Bad = Handler.make("bad", { payload: Schema.Unknown, maxSnoozes, run: () => Effect.void })
        const exit = yield* Effect.exit(
          Effect.scoped(Layer.build(Worker.layer({ handlers: [Bad] }).pipe(Layer.provideMerge(repoLayer(url)))))
        )
        expect(Exit.isFailure(exit)).toBe(true)
        const defect = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined
        expect(defect).toBeInstanceOf(InvalidInput)
        expect(defect).toMatchObject({ field: "maxSnoozes" })
        expect(String((defect as InvalidInput).message)).toMatch(/the handler of bad: must be an integer from 0 to 1000000/)
      }
    }))
}

export const snoozeRuntimeSuite = (backend: Backend) => {
  describe("Snooze", () => {
    snoozeLimits(backend)
    snoozeDelaysAndPromises(backend)
  })
}
