/**
 * Part of the runtime suite (run from ./suite.ts on SQLite and PostgreSQL):
 * a worker pool and items a person cancels. The latency from a cancel's
 * commit to its handler's interruption is measured and printed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Option, Schema } from "effect"
import { Cancel, Docket, type Events, Handler, QueueRepo, Worker } from "../../../src/index.js"
import type { Backend } from "../../support/db.js"
import { makeDue, repoLayer } from "../../support/db.js"
import { waitForCount, waitForEvent } from "../../support/events.js"
import { withPool } from "../../support/harness.js"

const item = (id: number) =>
  Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.get(id)).pipe(Effect.map(Option.getOrUndefined))

/** A QueueRepo of its own on the same database (its own connections): as another process would cancel. */
const otherProcess = (url: string) => Effect.map(Layer.build(repoLayer(url)), (ctx) => Context.get(ctx, QueueRepo.QueueRepo))

/** A handler that never ends; `interrupted` resolves with the time its run was interrupted. */
const neverEnding = (kind: string) => {
  const started = Effect.runSync(Deferred.make<number>())
  const interrupted = Effect.runSync(Deferred.make<number>())
  const handler = Handler.make(kind, {
    payload: Schema.Unknown,
    run: () =>
      Effect.zipRight(
        Deferred.succeed(started, performance.now()),
        Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, performance.now())))
      )
  })
  return { handler, started, interrupted }
}

const ms = (n: number) => `${n.toFixed(1)} ms`

export const cancelRuntimeSuite = (backend: Backend) => {
  describe("cancel", () => {
    // PostgreSQL: the lease is long (renewals every 10 s), so only the
    // notification can stop the run within the bound. SQLite across
    // processes: no notification; the renewal (every 500 ms) finds the cancel.
    const crossProcess = (listen: boolean) => {
      const leaseMs = backend.name === "pg" && listen ? 30_000 : 1_500
      const notified = backend.name === "pg" && listen
      const path = notified ? "its LISTEN notification" : `its next lease renewal (every ${leaseMs / 3} ms)`
      return it.live(`a cancel from another process interrupts the running handler through ${path}; the item ends cancelled, nothing recorded`, () => {
        const { handler, interrupted, started } = neverEnding("long")
        return withPool(backend, { handlers: [handler], lease: leaseMs, poll: "1 minute", listen }, (url) =>
          Effect.gen(function*() {
            const worker = yield* Worker.Worker
            const events = yield* worker.subscribe
            const added = yield* Docket.client(handler).enqueue(null)
            yield* Deferred.await(started)
            const other = yield* otherProcess(url)
            const sent = performance.now()
            expect(yield* other.cancel([added.id], { reason: "stop" })).toEqual(["cancelledRunning"])
            const committed = performance.now()
            const at = yield* Deferred.await(interrupted).pipe(Effect.timeout("10 seconds"))
            const { event, seen } = yield* waitForEvent(events, (e) => e._tag === "Cancelled", "10 seconds")
            const latency = at - committed
            console.log(
              `cancel latency (${backend.name}, another process, ${notified ? "notification" : "renewal"}): ` +
                `${ms(latency)} from the cancel's commit to the handler's interruption ` +
                `(${ms(at - sent)} from sending it); lease ${leaseMs} ms`
            )
            // PostgreSQL: about a second at most; else one renewal period and
            // the read of the item's state (slack for a loaded machine).
            expect(latency).toBeLessThan(notified ? 1_000 : leaseMs / 3 + 700)
            expect(event).toMatchObject({ _tag: "Cancelled", source: "cancel", error: "Cancelled: stop" })
            expect(seen.some((e) => e._tag === "LeaseLost")).toBe(false)
            expect(yield* item(added.id)).toMatchObject({ state: "cancelled", lastError: "Cancelled: stop", attempts: 1 })
            const counters = yield* worker.counters
            expect(counters).toMatchObject({ cancelled: 1, leaseLost: 0, stale: 0, completed: 0, running: 0 })
          }))
      })
    }
    crossProcess(true)
    if (backend.name === "pg") crossProcess(false)

    it.live("a replaceRunning enqueue interrupts its key's running handler (in this process, before any renewal), and the new payload runs", () => {
      const started = Effect.runSync(Deferred.make<void>())
      const interrupted = Effect.runSync(Deferred.make<void>())
      const ran = Effect.runSync(Deferred.make<number>())
      // The kind's default: every enqueue through its client replaces a running one.
      const Build = Handler.make("build", {
        payload: Schema.Struct({ rev: Schema.Number }),
        onConflict: "replaceRunning",
        run: (payload) =>
          payload.rev === 1
            ? Effect.zipRight(
              Deferred.succeed(started, undefined),
              Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
            ).pipe(Effect.asVoid)
            : Deferred.succeed(ran, payload.rev).pipe(Effect.asVoid)
      })
      return withPool(backend, { handlers: [Build], poll: "1 minute" }, () =>
        Effect.gen(function*() {
          const worker = yield* Worker.Worker
          const events = yield* worker.subscribe
          const client = Docket.client(Build)
          const first = yield* client.enqueue({ rev: 1 }, { key: "main" })
          yield* Deferred.await(started)
          const next = yield* client.enqueue({ rev: 2 }, { key: "main" })
          expect(next).toEqual({ _tag: "Enqueued", id: next.id, cancelled: [first.id] })
          // Within 5 s: the default lease renews every 10 s, so only the
          // enqueue's own cancel wake-up (this process) can stop it this soon.
          yield* Deferred.await(interrupted).pipe(Effect.timeout("5 seconds"))
          expect(yield* Deferred.await(ran).pipe(Effect.timeout("10 seconds"))).toBe(2)
          const { event } = yield* waitForEvent(events, (e) => e._tag === "Cancelled", "10 seconds")
          expect(event).toMatchObject({ _tag: "Cancelled", source: "cancel", error: "Cancelled: replaced by a new enqueue of its key" })
          expect(yield* item(first.id)).toMatchObject({ state: "cancelled", attempts: 1 })
        }))
    })

    it.live("a promise handler's job.signal aborts when its item is cancelled in this process, at once", () => {
      const started = Effect.runSync(Deferred.make<void>())
      const aborted = Effect.runSync(Deferred.make<number>())
      const Hang = Handler.fromPromise("hang", (_, job) =>
        new Promise<void>((resolve) => {
          job.signal.addEventListener("abort", () => {
            Deferred.unsafeDone(aborted, Effect.succeed(performance.now()))
            resolve()
          })
          Deferred.unsafeDone(started, Effect.void)
        }))
      return withPool(backend, { handlers: [Hang], lease: "30 seconds", poll: "1 minute" }, () =>
        Effect.gen(function*() {
          const worker = yield* Worker.Worker
          const events = yield* worker.subscribe
          const repo = yield* QueueRepo.QueueRepo
          const added = yield* repo.enqueue("hang", { n: 1 })
          yield* Deferred.await(started)
          expect(yield* repo.cancel([added.id])).toEqual(["cancelledRunning"])
          const committed = performance.now()
          const at = yield* Deferred.await(aborted).pipe(Effect.timeout("5 seconds"))
          console.log(`cancel latency (${backend.name}, this process): ${ms(at - committed)} from the cancel's commit to job.signal's abort`)
          expect(at - committed).toBeLessThan(1_000)
          yield* waitForEvent(events, (e) => e._tag === "Cancelled" && e.claim.id === added.id)
          expect(yield* item(added.id)).toMatchObject({ state: "cancelled", lastError: "Cancelled" })
          // The handler's promise resolved after the abort: nothing was recorded for it.
          yield* worker.whenIdle
          expect(yield* worker.counters).toMatchObject({ cancelled: 1, completed: 0, stale: 0 })
        }))
    })

    it.live("a waiting item cancelled never starts, even once due and of a higher priority", () => {
      const runs: Array<number> = []
      const Ok = Handler.make("ok", { payload: Schema.Unknown, run: (_, job) => Effect.sync(() => runs.push(job.id)) })
      return withPool(backend, { handlers: [Ok], poll: "1 minute" }, () =>
        Effect.gen(function*() {
          const worker = yield* Worker.Worker
          const events = yield* worker.subscribe
          const repo = yield* QueueRepo.QueueRepo
          yield* worker.whenIdle
          const unwanted = yield* repo.enqueue("ok", 1, { delay: "1 hour", priority: 10 })
          expect(yield* repo.cancel([unwanted.id])).toEqual(["cancelled"])
          // Due now and first in claim order, were it not cancelled.
          yield* makeDue(unwanted.id)
          const wanted = yield* repo.enqueue("ok", 2)
          yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === wanted.id)
          yield* worker.whenIdle
          expect(runs).toEqual([wanted.id])
          expect((yield* item(unwanted.id))?.state).toBe("cancelled")
        }))
    })

    it.live("the waiting twin of a cancelled running keyed item runs once it is cancelled", () => {
      const order: Array<string> = []
      const Mirror = Handler.make("mirror", {
        payload: Schema.Struct({ push: Schema.Number }),
        run: (p) =>
          Effect.sync(() => order.push(`start ${p.push}`)).pipe(
            Effect.zipRight(p.push === 1 ? Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => order.push("interrupted 1")))) : Effect.void),
            Effect.zipRight(Effect.sync(() => order.push(`end ${p.push}`)))
          )
      })
      return withPool(backend, { handlers: [Mirror], concurrency: 4, poll: "1 minute" }, () =>
        Effect.gen(function*() {
          const events = yield* (yield* Worker.Worker).subscribe
          const repo = yield* QueueRepo.QueueRepo
          const mirror = Docket.client(Mirror)
          const first = yield* mirror.enqueue({ push: 1 }, { key: "repo-1" })
          yield* waitForEvent(events, (e) => e._tag === "Started")
          const twin = yield* mirror.enqueue({ push: 2 }, { key: "repo-1" })
          expect(twin._tag).toBe("Enqueued")
          expect(yield* repo.cancel([first.id])).toEqual(["cancelledRunning"])
          // Both outcomes, in either order: the twin may start, and even
          // finish, before the first run's interruption is seen: the cancel's
          // commit makes it claimable at once, and the holder interrupts its
          // run on hearing of the cancel, each a round trip of its own (CI
          // runs lost that race twice: first the start, then the end).
          yield* waitForCount(
            events,
            (e) => (e._tag === "Completed" && e.claim.id === twin.id) || (e._tag === "Cancelled" && e.claim.id === first.id),
            2
          )
          // What holds: the first run never ends, it is interrupted, and the twin runs.
          expect(order[0]).toBe("start 1")
          expect([...order].sort()).toEqual(["end 2", "interrupted 1", "start 1", "start 2"])
          expect(order.indexOf("start 2")).toBeLessThan(order.indexOf("end 2"))
          expect((yield* item(first.id))?.state).toBe("cancelled")
          expect((yield* item(twin.id))?.state).toBe("done")
        }))
    })

    it.live("a cancel of an item waiting in the pool's buffer drops it: it never starts", () => {
      const gate = Effect.runSync(Deferred.make<void>())
      const started: Array<number> = []
      const Block = Handler.make("block", {
        payload: Schema.Unknown,
        run: (_, job) => Effect.zipRight(Effect.sync(() => started.push(job.id)), Deferred.await(gate))
      })
      const options: Worker.Options = { handlers: [Block], concurrency: 1, prefetch: 2, prefetchHold: "10 seconds", lease: "30 seconds" }
      return withPool(backend, options, () =>
        Effect.gen(function*() {
          const worker = yield* Worker.Worker
          const events = yield* worker.subscribe
          const repo = yield* QueueRepo.QueueRepo
          const first = yield* repo.enqueue("block", 1)
          yield* waitForEvent(events, (e) => e._tag === "Started" && e.claim.id === first.id)
          const second = yield* repo.enqueue("block", 2)
          yield* waitForEvent(events, (e) => e._tag === "Claimed" && e.claim.id === second.id)
          expect(yield* repo.cancel([second.id])).toEqual(["cancelledRunning"])
          const { event } = yield* waitForEvent(events, (e) => e._tag === "Cancelled")
          expect(event).toMatchObject({ claim: { id: second.id }, source: "cancel", error: "Cancelled" })
          expect((yield* worker.counters).buffered).toBe(0)
          yield* Deferred.succeed(gate, undefined)
          yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === first.id)
          yield* worker.whenIdle
          expect(started).toEqual([first.id])
          expect((yield* item(second.id))?.state).toBe("cancelled")
        }))
    })

    it.live("the handler's Cancel outcome ends the item cancelled (not dead), whatever attempts remain", () => {
      const Unwanted = Handler.make("unwanted", {
        payload: Schema.Unknown,
        maxAttempts: 5,
        run: () => Effect.fail(new Cancel({ reason: "user left" }))
      })
      return withPool(backend, { handlers: [Unwanted] }, () =>
        Effect.gen(function*() {
          const worker = yield* Worker.Worker
          const events = yield* worker.subscribe
          const added = yield* Docket.client(Unwanted).enqueue(1)
          const { event, seen } = yield* waitForEvent(events, (e) => e._tag === "Cancelled")
          expect(event).toMatchObject({ claim: { id: added.id }, source: "handler", error: "Cancel: user left" })
          expect(seen.some((e: Events.Event) => e._tag === "Dead")).toBe(false)
          expect(yield* item(added.id)).toMatchObject({ state: "cancelled", attempts: 1, lastError: "Cancel: user left" })
          expect(yield* worker.counters).toMatchObject({ cancelled: 1, dead: 0 })
          expect(yield* (yield* QueueRepo.QueueRepo).stats).toMatchObject({ cancelled: 1, dead: 0 })
        }))
    })
  })
}
