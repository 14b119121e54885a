/**
 * Long jobs, on SQLite and PostgreSQL (in-process pools, so their events can
 * be watched):
 *
 * - a job lasting ten lease lengths runs once: its lease is renewed while it
 *   runs, and a second pool polling the same queue never takes it;
 * - a run whose lease is taken by another worker (its renewal finds a new
 *   claim token) is interrupted, and that run's claim can no longer complete,
 *   fail, release or extend the item;
 * - a run that finishes after its lease was taken, before a renewal noticed,
 *   has its completion refused: the item stays with the new owner.
 */
import { Context, Deferred, Duration, Effect, Fiber, Layer, Option, Schema, type Scope } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Docket from "../../src/Docket.js"
import type { Event } from "../../src/Events.js"
import * as Handler from "../../src/Handler.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import * as Worker from "../../src/Worker.js"
import { type Backend, expireLease, pgAvailable, pgBackend, setRow, sqliteBackend } from "../support/db.js"
import { waitForEvent } from "../support/events.js"
import { report, waitFor } from "./support.js"

/** A pool (with its own database connection) in the current scope. */
const pool = (url: string, handler: Handler.Any, worker: string, lease: Duration.DurationInput) =>
  Effect.map(
    Layer.build(Docket.layer({ database: url, handlers: [handler], lease, poll: "100 millis", worker })),
    (context) => ({ worker: Context.get(context, Worker.Worker), repo: Context.get(context, QueueRepo.QueueRepo), context })
  )

/**
 * Takes the item's lease away from its worker in one statement, as another
 * worker's claim after the lease ran out would: a new token, a new owner, a
 * new lease. (Expiring the lease and then claiming would race with the pool's
 * own claimer, which may take the expired item back itself.) Returns the new
 * owner's claim.
 */
const steal = (claim: QueueRepo.Claim) =>
  Effect.gen(function*() {
    const leaseUntil = Date.now() + 600_000
    yield* setRow(claim.id, {
      lease_seq: claim.token + 1,
      claimed_by: "thief",
      attempts: claim.attempt + 1,
      lease_until: leaseUntil
    })
    return { ...claim, token: claim.token + 1, worker: "thief", attempt: claim.attempt + 1, leaseUntil }
  })

const scenarios = (backend: Backend) => {
  const scoped: Runner = (effect) => Effect.runPromise(Effect.scoped(effect).pipe(Effect.timeout("90 seconds")))
  const run = <A, E>(program: (url: string) => Effect.Effect<A, E, Scope.Scope>) =>
    scoped(Effect.flatMap(Effect.promise(() => backend.fresh()), program))

  // The pool claims back an item whose lease ran out while it ran it (run once, checked by two tests).
  let reclaimed: ReturnType<typeof reclaimScenario> | undefined
  const reclaim = () => (reclaimed ??= reclaimScenario(backend, scoped))

  it.concurrent("a pool can claim back an item whose lease ran out while it ran it", async () => {
    const result = await reclaim()
    expect(result.secondStarted).toBe(true)
  }, 60_000)

  // Was a bug: the Worker kept its runs by item id, so a claimed-back item's new
  // run replaced the stale one's entry (the stale run was never interrupted, and
  // when it ended the new run stopped being renewed). Runs are now tracked apart
  // and fenced results matched by id and token.
  it.concurrent("...then stops the stale run and keeps the new run's lease alive", async () => {
    const result = await reclaim()
    expect(result.firstStopped, "the run with the stale token is interrupted").toBe(true)
    expect(result.renewed, "the new run's lease is renewed").toBe(true)
    expect(result.attempts).toBe(2)
  }, 60_000)

  it.concurrent("a job lasting ten lease lengths runs once, kept alive by lease renewal", () =>
    run((url) =>
      Effect.gen(function*() {
        const leaseMs = 1000
        const runs: Array<string> = []
        const Long = Handler.make("rel.long", {
          payload: Schema.Struct({ ms: Schema.Number }),
          run: (payload, job) =>
            Effect.sync(() => runs.push(`${job.worker} attempt ${job.attempt}`)).pipe(
              Effect.zipRight(Effect.sleep(Duration.millis(payload.ms)))
            )
        })
        const a = yield* pool(url, Long, "A", Duration.millis(leaseMs))
        const b = yield* pool(url, Long, "B", Duration.millis(leaseMs))
        const eventsA = yield* a.worker.subscribe
        const eventsB = yield* b.worker.subscribe
        const started = Date.now()
        const added = yield* Docket.client(Long).enqueue({ ms: 10 * leaseMs }).pipe(Effect.provide(a.context))
        // Watch the lease while it runs: each renewal moves lease_until on.
        const leaseEnds = new Set<number>()
        const sampler = yield* a.repo.get(added.id).pipe(
          Effect.tap((item) =>
            Effect.sync(() => {
              if (Option.isSome(item) && item.value.leaseUntil !== null) leaseEnds.add(item.value.leaseUntil)
            })
          ),
          Effect.zipRight(Effect.sleep("200 millis")),
          Effect.forever,
          Effect.fork
        )
        const isDone = (e: Event) => e._tag === "Completed" && e.claim.id === added.id
        yield* Effect.raceFirst(waitForEvent(eventsA, isDone, "60 seconds"), waitForEvent(eventsB, isDone, "60 seconds"))
        yield* Fiber.interrupt(sampler)
        const tookMs = Date.now() - started
        const counters = [yield* a.worker.counters, yield* b.worker.counters]
        report(`long job (${backend.name})`, {
          leaseMs,
          jobMs: 10 * leaseMs,
          runs: runs.length,
          leaseEndsSeen: leaseEnds.size,
          leaseLost: counters[0].leaseLost + counters[1].leaseLost,
          tookMs
        })
        expect(runs).toHaveLength(1)
        expect(tookMs).toBeGreaterThanOrEqual(10 * leaseMs)
        // Renewed again and again (about every third of a lease), never lost.
        expect(leaseEnds.size).toBeGreaterThanOrEqual(5)
        expect(counters.map((c) => [c.leaseLost, c.stale, c.completed])).toEqual(
          expect.arrayContaining([[0, 0, 1], [0, 0, 0]])
        )
        expect(yield* a.repo.get(added.id)).toMatchObject({ value: { state: "done" } })
      })
    ), 120_000)

  it.concurrent("a run whose lease is taken is interrupted; its stale claim changes nothing", () =>
    run((url) =>
      Effect.gen(function*() {
        const interrupted: Array<number> = []
        const aborted: Array<number> = []
        const Hang = Handler.make("rel.hang", {
          payload: Schema.Unknown,
          run: (_payload, job) =>
            Effect.sync(() => job.signal.addEventListener("abort", () => aborted.push(job.id))).pipe(
              Effect.zipRight(Effect.never),
              Effect.onInterrupt(() => Effect.sync(() => interrupted.push(job.id)))
            )
        })
        const a = yield* pool(url, Hang, "A", "1500 millis")
        const events = yield* a.worker.subscribe
        const added = yield* a.repo.enqueue("rel.hang", null)
        const { event } = yield* waitForEvent(events, (e) => e._tag === "Started" && e.claim.id === added.id)
        const stale = (event as Extract<Event, { _tag: "Started" }>).claim
        const thief = yield* steal(stale).pipe(Effect.provide(a.context))
        const stolenAt = Date.now()
        // The next renewal (every 500 ms) finds the new token: the run is interrupted.
        yield* waitForEvent(events, (e) => e._tag === "LeaseLost" && e.claim.id === added.id, "10 seconds")
        const noticedMs = Date.now() - stolenAt
        yield* Effect.promise(() => waitFor("the handler sees the interruption", () => interrupted.length === 1, 5000, 10))
        expect(aborted).toEqual([added.id])
        // The stale claim changes nothing.
        expect(yield* a.repo.complete(stale)).toBe(false)
        expect(yield* a.repo.fail(stale, "late failure", { _tag: "Retry", delay: 0 })).toBe("stale")
        expect(yield* a.repo.extend(stale, "1 minute")).toBe(false)
        expect(yield* a.repo.release(stale)).toBe("stale")
        const item = Option.getOrThrow(yield* a.repo.get(added.id))
        const { attempts, claimedBy, lastError, leaseUntil, state } = item
        expect({ state, claimedBy, attempts, lastError, leaseUntil }).toEqual({
          state: "running",
          claimedBy: "thief",
          attempts: 2,
          lastError: null,
          leaseUntil: thief.leaseUntil
        })
        expect(yield* a.repo.complete(thief)).toBe(true)
        const counters = yield* a.worker.counters
        expect(counters.leaseLost).toBe(1)
        report(`lease taken (${backend.name})`, { interrupted: interrupted.length, noticedMs, staleAccepted: 0 })
      })
    ), 120_000)

  it.concurrent("a run that ends after its lease was taken has its completion refused", () =>
    run((url) =>
      Effect.gen(function*() {
        const latches = new Map<number, Deferred.Deferred<void>>()
        const Gated = Handler.make("rel.gated", {
          payload: Schema.Unknown,
          run: (_payload, job) => Effect.flatMap(Effect.sync(() => latches.get(job.id)!), Deferred.await)
        })
        // A long lease (renewed every 10 s): the run ends before any renewal could notice.
        const a = yield* pool(url, Gated, "A", "30 seconds")
        const events = yield* a.worker.subscribe
        const added = yield* a.repo.enqueue("rel.gated", null)
        latches.set(added.id, yield* Deferred.make<void>())
        const { event } = yield* waitForEvent(events, (e) => e._tag === "Started" && e.claim.id === added.id)
        const thief = yield* steal((event as Extract<Event, { _tag: "Started" }>).claim).pipe(Effect.provide(a.context))
        yield* Deferred.succeed(latches.get(added.id)!, undefined)
        yield* Effect.promise(() => waitFor("the refused completion", () => Effect.runPromise(a.worker.counters).then((c) => c.stale === 1), 10_000, 20))
        const counters = yield* a.worker.counters
        expect(counters.completed).toBe(0)
        const item = Option.getOrThrow(yield* a.repo.get(added.id))
        expect(item).toMatchObject({ state: "running", claimedBy: "thief", leaseUntil: thief.leaseUntil })
        expect(yield* a.repo.complete(thief)).toBe(true)
        report(`late completion (${backend.name})`, { staleRefused: counters.stale, completedByStaleRun: counters.completed })
      })
    ), 120_000)
}

/**
 * A pool whose own lease on a running item ran out (renewals late: a handler
 * that blocked the event loop, a SQLite busy wait) may claim that item again
 * itself. Then the first run holds a stale token and must be stopped like any
 * run whose lease was taken, and the second run must be kept alive.
 */
const reclaimScenario = (backend: Backend, run: Runner) =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(() => backend.fresh())
    const latches = new Map<number, Deferred.Deferred<void>>()
    for (let attempt = 1; attempt <= 10; attempt++) latches.set(attempt, yield* Deferred.make<void>())
    const interrupted: Array<number> = []
    const Gated = Handler.make("rel.again", {
      payload: Schema.Unknown,
      run: (_payload, job) =>
        Deferred.await(latches.get(job.attempt)!).pipe(
          Effect.onInterrupt(() => Effect.sync(() => interrupted.push(job.attempt)))
        )
    })
    const a = yield* pool(url, Gated, "A", "1500 millis")
    const events = yield* a.worker.subscribe
    const added = yield* a.repo.enqueue("rel.again", null)
    const startedAttempt = (n: number) => (e: Event) => e._tag === "Started" && e.claim.id === added.id && e.claim.attempt === n
    yield* waitForEvent(events, startedAttempt(1))
    // The lease runs out while attempt 1 runs; the pool's claimer (every 100 ms) takes
    // the item back before its renewer (every 500 ms) extends it (retried until it does).
    const second = yield* expireLease(added.id).pipe(
      Effect.provide(a.context),
      Effect.zipRight(waitForEvent(events, startedAttempt(2), "400 millis")),
      Effect.retry({ times: 30 })
    )
    const token2 = (second.event as Extract<Event, { _tag: "Started" }>).claim.token
    // Attempt 1's token is stale: it must be interrupted, as when another worker takes the lease.
    const firstStopped = yield* Effect.promise(() =>
      waitFor("attempt 1 interrupted", () => interrupted.includes(1), 3000, 20).then(() => true, () => false)
    )
    // Attempt 1 ends now if it still runs (its outcome is refused: stale).
    yield* Deferred.succeed(latches.get(1)!, undefined)
    // Attempt 2 holds the item: its lease must keep being renewed (three renewals, about 1.5 s).
    const seen = new Set<number>()
    const renewed = yield* Effect.promise(() =>
      waitFor("attempt 2's lease renewed three times", async () => {
        const item = Option.getOrUndefined(await Effect.runPromise(a.repo.get(added.id)))
        if (item?.leaseUntil != null && item.claimedBy === "A" && item.attempts === 2) seen.add(item.leaseUntil)
        return seen.size >= 4
      }, 4000, 50).then(() => true, () => false)
    )
    const item = Option.getOrUndefined(yield* a.repo.get(added.id))
    yield* Deferred.succeed(latches.get(2)!, undefined)
    for (let attempt = 3; attempt <= 10; attempt++) yield* Deferred.succeed(latches.get(attempt)!, undefined)
    const counters = yield* a.worker.counters
    report(`own lease ran out (${backend.name})`, {
      staleRunInterrupted: firstStopped,
      newRunRenewed: renewed,
      attemptsAtEnd: item?.attempts ?? -1
    })
    return { secondStarted: token2 > 0, firstStopped, renewed, attempts: item?.attempts, counters }
  }).pipe(run)

type Runner = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Promise<A>

export const longJobsScenario = () =>
  describe("long jobs and lost leases", () => {
    const sqlite = sqliteBackend()
    const pg = pgBackend()
    afterAll(async () => {
      await sqlite.cleanup()
      await pg.cleanup()
    })
    describe("on SQLite", () => scenarios(sqlite))
    describe.skipIf(!pgAvailable)("on PostgreSQL", () => scenarios(pg))
  })
