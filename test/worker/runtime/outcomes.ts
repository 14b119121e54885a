/**
 * The runtime suite: a handler's outcomes (success, Retry, Permanent, Timeout,
 * defects, undecodable payloads) recorded by a worker pool on a real database;
 * run on SQLite and PostgreSQL by test/worker/runtime/sqlite.test.ts and pg.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema } from "effect"
import { Backoff, Cancel, Docket, type Events, Handler, Permanent, QueueRepo, Retry, Worker } from "../../../src/index.js"
import type { Backend } from "../../support/db.js"
import { repoLayer, setRow } from "../../support/db.js"
import { waitForCount, waitForEvent } from "../../support/events.js"
import { withPool } from "../../support/harness.js"
import { fast, item } from "../../support/runtime.js"

const doneAndRetried = (backend: Backend) => {
  it.live("success: done, the item kept as done (who ran it, when it finished)", () => {
    const Ok = Handler.make("ok", { payload: Schema.Struct({ n: Schema.Number }), run: () => Effect.void })
    return withPool(backend, { handlers: [Ok] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const added = yield* Docket.client(Ok).enqueue({ n: 1 })
        const { event } = yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
        const claim = (event as Extract<Events.Event, { _tag: "Completed" }>).claim
        const done = yield* item(added.id)
        expect(done).toMatchObject({ state: "done", claimedBy: claim.worker, leaseUntil: null, result: null, errors: [] })
        expect(done?.finishedAt).toBeGreaterThanOrEqual(claim.claimedAt)
      }))
  })

  it.live("Retry: waits with its error recorded; a Retry delay is used; the last attempt is dead", () => {
    const Flaky = Handler.make("flaky", {
      payload: Schema.Unknown,
      maxAttempts: 3,
      backoff: fast,
      run: (_, job) => Effect.fail(new Retry({ reason: `refused ${job.attempt}`, delay: job.attempt === 1 ? 30 : undefined }))
    })
    return withPool(backend, { handlers: [Flaky] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const added = yield* Docket.client(Flaky).enqueue(null)
        const { seen } = yield* waitForEvent(events, (e) => e._tag === "Dead" && e.claim.id === added.id)
        const retried = seen.filter((e) => e._tag === "Retried")
        expect(retried.map((e) => e._tag === "Retried" && e.delayMs)).toEqual([30, 20])
        const dead = yield* item(added.id)
        expect(dead?.state).toBe("dead")
        expect(dead?.attempts).toBe(3)
        expect(dead?.lastError).toBe("Retry: refused 3")
      }))
  })

  it.live("a handler's maxAttempts applies to items enqueued without one, whoever enqueued them; an item's own wins", () => {
    const budgets: Array<[number, number, number]> = []
    const Flaky = Handler.make("flaky", {
      payload: Schema.Unknown,
      maxAttempts: 3,
      backoff: fast,
      run: (_, job) => Effect.zipRight(Effect.sync(() => budgets.push([job.id, job.attempt, job.maxAttempts])), Effect.fail(new Retry({ reason: "no" })))
    })
    return withPool(backend, { handlers: [Flaky] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const repo = yield* QueueRepo.QueueRepo
        const raw = yield* repo.enqueue("flaky", 1)
        const typed = yield* Docket.client(Flaky).enqueue(2)
        const own = yield* Docket.client(Flaky).enqueue(3, { maxAttempts: 4 })
        const seen: Array<Events.Event> = []
        yield* waitForCount(events, (e) => seen.push(e) > 0 && e._tag === "Dead", 3)
        expect((yield* item(raw.id))?.maxAttempts).toBeNull()
        expect((yield* item(typed.id))?.maxAttempts).toBeNull()
        for (const [id, attempts] of [[raw.id, 3], [typed.id, 3], [own.id, 4]]) {
          expect(yield* item(id)).toMatchObject({ state: "dead", attempts })
          expect(budgets.filter(([i]) => i === id).map(([, a, m]) => [a, m]))
            .toEqual(Array.from({ length: attempts }, (_, k) => [k + 1, attempts]))
        }
        // The events carry the same budget (the command's status line prints it).
        const retried = seen.flatMap((e) => e._tag === "Retried" && e.claim.id === raw.id ? [[e.claim.attempt, e.claim.maxAttempts]] : [])
        expect(retried).toEqual([[1, 3], [2, 3]])
      }))
  })
}

const deadOrCancelled = (backend: Backend) => {
  it.live("an item that kept losing its lease is dead past its handler's maxAttempts (LeaseExpired)", () => {
    const runs: Array<number> = []
    const Ok = Handler.make("ok", { payload: Schema.Unknown, maxAttempts: 2, run: (_, job) => Effect.sync(() => runs.push(job.id)) })
    return withPool(backend, { handlers: [Ok], poll: "100 millis" }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const repo = yield* QueueRepo.QueueRepo
        // Two claims whose runs never recorded an outcome: the next is attempt 3 of the handler's 2.
        const added = yield* repo.enqueue("ok", 1, { delay: "1 hour" })
        yield* setRow(added.id, { attempts: 2, run_at: 0, last_error: "earlier" })
        yield* waitForEvent(events, (e) => e._tag === "Dead" && e.claim.id === added.id)
        expect(runs).toEqual([])
        expect((yield* item(added.id))?.lastError).toBe(
          "LeaseExpired: attempt 3 of 2; earlier runs lost their lease (their worker stopped or died) before recording an outcome; last error: earlier"
        )
      }))
  })

  it.live("a handler's maxAttempts that is not an integer from 1 to 10,000 stops the pool from starting", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const Bad = Handler.make("bad", { payload: Schema.Unknown, maxAttempts: 0, run: () => Effect.void })
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(Worker.layer({ handlers: [Bad] }).pipe(Layer.provideMerge(repoLayer(url))))))
      expect(Exit.isFailure(exit) && String(Exit.isFailure(exit) ? exit.cause : "")).toMatch(/the handler of bad: maxAttempts must be an integer from 1 to 10000/)
    }))

  it.live("Permanent: dead at once, whatever attempts remain; Cancel: cancelled at once (final, not dead)", () => {
    const Gone = Handler.make("gone", { payload: Schema.Unknown, run: () => Effect.fail(new Permanent({ reason: "410 Gone" })) })
    const Unwanted = Handler.make("unwanted", { payload: Schema.Unknown, run: () => Effect.fail(new Cancel({ reason: "user left" })) })
    return withPool(backend, { handlers: [Gone, Unwanted] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const a = yield* Docket.client(Gone).enqueue(1)
        const b = yield* Docket.client(Unwanted).enqueue(2)
        yield* waitForCount(events, (e) => e._tag === "Dead" || e._tag === "Cancelled", 2)
        expect(yield* item(a.id)).toMatchObject({ state: "dead", attempts: 1, lastError: "Permanent: 410 Gone" })
        expect(yield* item(b.id)).toMatchObject({ state: "cancelled", attempts: 1, lastError: "Cancel: user left" })
      }))
  })

  it.live("Timeout: a run over the kind's timeout is interrupted and retried", () => {
    const interrupted: Array<number> = []
    const Slow = Handler.make("slow", {
      payload: Schema.Unknown,
      timeout: "50 millis",
      backoff: Backoff.constant("1 hour"),
      run: (_, job) => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted.push(job.id))))
    })
    return withPool(backend, { handlers: [Slow] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const added = yield* Docket.client(Slow).enqueue(null)
        yield* waitForEvent(events, (e) => e._tag === "Retried")
        expect(interrupted).toEqual([added.id])
        const row = yield* item(added.id)
        expect(row?.state).toBe("waiting")
        expect(row?.lastError).toMatch(/^Timeout: the handler ran longer than 50ms/)
      }))
  })

  it.live("a payload that does not decode is dead at once, with the decode error readable", () => {
    const Typed = Handler.make("typed", { payload: Schema.Struct({ to: Schema.String }), run: () => Effect.void })
    return withPool(backend, { handlers: [Typed] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const repo = yield* QueueRepo.QueueRepo
        const added = yield* repo.enqueue("typed", { to: 42 })
        yield* waitForEvent(events, (e) => e._tag === "Dead")
        const row = yield* item(added.id)
        expect(row?.attempts).toBe(1)
        expect(row?.lastError).toMatch(/^DecodeError: /)
        expect(row?.lastError).toContain("to")
      }))
  })
}

const kindsAndDefects = (backend: Backend) => {
  it.live("claiming every kind: a kind with no handler is dead at once", () =>
    withPool(backend, { handlers: [], claimKinds: "all" }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const added = yield* (yield* QueueRepo.QueueRepo).enqueue("nobody.home", {})
        yield* waitForEvent(events, (e) => e._tag === "Dead")
        expect(yield* item(added.id)).toMatchObject({ state: "dead", lastError: "UnknownKind: no handler for kind nobody.home" })
      })))

  it.live("by default a pool claims only its own kinds: another kind's item waits, untouched, for a pool that has its handler", () => {
    const Mine = Handler.make("mine", { payload: Schema.Unknown, run: () => Effect.void })
    return withPool(backend, { handlers: [Mine] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const repo = yield* QueueRepo.QueueRepo
        const theirs = yield* repo.enqueue("theirs", { n: 1 })
        const mine = yield* repo.enqueue("mine", { n: 2 })
        yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === mine.id)
        // Claimed after the other kind's item (higher id): a claim of every kind would have taken it first.
        expect(yield* item(theirs.id)).toMatchObject({ state: "waiting", attempts: 0, lastError: null })
        expect((yield* (yield* Worker.Worker).counters).claimed).toBe(1)
      }))
  })

  it.live("defects (a throw, Effect.die) are recorded and retried, and never stop the pool", () => {
    const Throws = Handler.make("throws", {
      payload: Schema.Unknown,
      backoff: Backoff.constant("1 hour"),
      run: () =>
        Effect.sync(() => {
          throw new TypeError("cannot read x of undefined")
        })
    })
    const Dies = Handler.make("dies", { payload: Schema.Unknown, backoff: Backoff.constant("1 hour"), run: () => Effect.die("boom") })
    const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
    return withPool(backend, { handlers: [Throws, Dies, Ok], concurrency: 3 }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const t = yield* Docket.client(Throws).enqueue(null)
        const d = yield* Docket.client(Dies).enqueue(null)
        yield* waitForCount(events, (e) => e._tag === "Retried", 2)
        expect(yield* item(t.id)).toMatchObject({ state: "waiting", lastError: "Defect: TypeError: cannot read x of undefined" })
        expect((yield* item(d.id))?.lastError).toMatch(/^Defect: .*boom/)
        // The pool still runs other work.
        const ok = yield* Docket.client(Ok).enqueueMany(Array.from({ length: 5 }, (_, i) => ({ payload: i })))
        yield* waitForCount(events, (e) => e._tag === "Completed", 5)
        for (const r of ok) expect((yield* item(r.id))?.state).toBe("done")
      }))
  })

  it.live("a typed failure that is not an outcome is retried with the kind's backoff", () => {
    class MailRefused extends Schema.TaggedError<MailRefused>()("MailRefused", { code: Schema.Number }) {}
    const Mail = Handler.make("mail", {
      payload: Schema.Unknown,
      backoff: Backoff.constant("1 hour"),
      run: () => Effect.fail(new MailRefused({ code: 451 }))
    })
    return withPool(backend, { handlers: [Mail] }, () =>
      Effect.gen(function*() {
        const events = yield* (yield* Worker.Worker).subscribe
        const added = yield* Docket.client(Mail).enqueue(null)
        const { event } = yield* waitForEvent(events, (e) => e._tag === "Retried")
        expect(event._tag === "Retried" && event.delayMs).toBe(3_600_000)
        expect((yield* item(added.id))?.lastError).toMatch(/^MailRefused/)
      }))
  })
}

export const outcomesRuntimeSuite = (backend: Backend) => {
  describe("outcomes", () => {
    doneAndRetried(backend)
    deadOrCancelled(backend)
    kindsAndDefects(backend)
  })
}
