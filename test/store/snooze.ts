/**
 * Part of the shared store suite (run from ./suite.ts on every
 * backend): the fenced snooze write. A snoozed item waits again, due after
 * its delay on the database's clock, its attempt not counted and its snoozes
 * one higher; a keyed one whose twin waits is absorbed; a stale claim changes
 * nothing. Time is moved by editing rows, never by sleeping.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { type Duration, Effect, Option } from "effect"
import { InvalidInput, StorageError } from "../../src/Errors.js"
import { MAX_DELAY_MS } from "../../src/internal/validate.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, expireLease, makeDue } from "../support/db.js"
import { dropTable } from "../support/store.js"
import { dbNow, expectAround } from "../support/harness.js"
import { storeContext } from "../support/store.js"

const Repo = QueueRepo.QueueRepo
const lease = "30 seconds"

const getItem = (id: number) =>
  Effect.flatMap(Repo, (repo) => repo.get(id)).pipe(Effect.map(Option.getOrThrow))

const claimOne = Effect.flatMap(Repo, (repo) => repo.claim({ worker: "w", limit: 1, lease })).pipe(
  Effect.map((claims) => {
    expect(claims).toHaveLength(1)
    return claims[0]
  })
)

const snoozeAndStale = (backend: Backend) => {
  const { run } = storeContext(backend)
  it.live("waiting again, due after the delay on the database's clock; the attempt not counted, snoozes one higher", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("export.poll", { n: 1 })
      expect((yield* getItem(added.id)).snoozes).toBe(0)
      // A failed first attempt: the snooze keeps its error and its count.
      const first = yield* claimOne
      expect(first.snoozes).toBe(0)
      expect(yield* repo.fail(first, "boom", { _tag: "Retry", delay: 0 })).toBe("retried")
      const second = yield* claimOne
      expect([second.attempt, second.snoozes]).toEqual([2, 0])
      const before = yield* dbNow
      expect(yield* repo.snooze(second, "10 minutes")).toBe("snoozed")
      const after = yield* dbNow
      const snoozed = yield* getItem(added.id)
      expect(snoozed).toMatchObject({
        state: "waiting",
        attempts: 1,
        snoozes: 1,
        claimedBy: null,
        leaseUntil: null,
        lastError: "boom"
      })
      expectAround(snoozed.runAt, before + 600_000, after + 600_000, 50)
      // Not due until the delay has passed.
      expect(yield* repo.claim({ worker: "w", limit: 1, lease })).toEqual([])
      expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 1 })
      yield* makeDue(added.id)
      const third = yield* claimOne
      expect([third.attempt, third.snoozes, third.lastError]).toEqual([2, 1, "boom"])
      expect(third.token).not.toBe(second.token)
      // A delay of 0 (milliseconds, or a Duration input): due at once.
      expect(yield* repo.snooze(third, 0)).toBe("snoozed")
      const fourth = yield* claimOne
      expect([fourth.attempt, fourth.snoozes]).toEqual([2, 2])
      expect(yield* repo.complete(fourth)).toBe(true)
      expect(yield* countAll).toBe(1)
      // Done after two attempts and two snoozes; the one failure is its history.
      const done = Option.getOrThrow(yield* repo.get(fourth.id))
      expect(done).toMatchObject({ state: "done", attempts: 2, snoozes: 2 })
      expect(done.errors.map((e) => [e.attempt, e.error])).toEqual([[1, "boom"]])
    })))

  it.live("a stale snooze returns stale and changes nothing, also while a twin waits", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("job", 1, { key: "k" })
      const [stale] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      yield* expireLease(added.id)
      const [fresh] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(fresh.id).toBe(added.id)
      const before = yield* getItem(added.id)
      expect(yield* repo.snooze(stale, "1 minute")).toBe("stale")
      expect(yield* getItem(added.id)).toEqual(before)
      // A twin waiting must not make the stale snooze delete the item either.
      yield* repo.enqueue("job", 2, { key: "k" })
      expect(yield* repo.snoozeMany([{ claim: stale, delay: 0 }])).toEqual(["stale"])
      expect(yield* getItem(added.id)).toEqual(before)
      expect(yield* repo.snooze(fresh, "1 minute")).toBe("absorbed")
      expect(yield* repo.get(added.id)).toEqual(Option.none())
    })))
}

const snoozeTwinsAndBatches = (backend: Backend) => {
  const { run } = storeContext(backend)
  it.live("a snoozed keyed item whose twin waits is absorbed; two running twins in one batch: the first waits, the second is absorbed", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("mirror.refresh", 1, { key: "k" })
      const running = yield* claimOne
      const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k" })
      expect(yield* repo.snooze(running, "5 minutes")).toBe("absorbed")
      expect(yield* repo.get(first.id)).toEqual(Option.none())
      expect(yield* getItem(twin.id)).toMatchObject({ state: "waiting", snoozes: 0, attempts: 0 })
      // Two running items of one key: the twin's lease ran out while a newer one ran.
      const [ca] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      expect(ca.id).toBe(twin.id)
      const b = yield* repo.enqueue("mirror.refresh", 3, { key: "k", priority: 5 })
      yield* expireLease(twin.id)
      const [cb] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(cb.id).toBe(b.id)
      const [ca2] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(ca2.id).toBe(twin.id)
      expect(yield* repo.snoozeMany([{ claim: ca2, delay: "1 minute" }, { claim: cb, delay: 0 }])).toEqual([
        "snoozed",
        "absorbed"
      ])
      expect(yield* countAll).toBe(1)
      expect(yield* getItem(twin.id)).toMatchObject({ state: "waiting", snoozes: 1, attempts: 1 })
    })))

  it.live("snoozeMany applies per item, in input order; a bad delay is InvalidInput and changes nothing of the batch", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueueMany([0, 1, 2].map((n) => ({ kind: "job", payload: n, priority: 10 - n })))
      const [c0, c1, c2] = yield* repo.claim({ worker: "w", limit: 3, lease })
      expect(yield* repo.complete(c1)).toBe(true)
      const stored = yield* getItem(c0.id)
      for (const delay of [-1, Number.NaN, Infinity, MAX_DELAY_MS + 1, "soon" as Duration.DurationInput]) {
        const error = yield* Effect.flip(repo.snoozeMany([{ claim: c0, delay: 0 }, { claim: c2, delay }]))
        expect(error).toBeInstanceOf(InvalidInput)
        expect((error as InvalidInput).field).toBe("delay")
      }
      expect(yield* getItem(c0.id)).toEqual(stored)
      expect((yield* getItem(c2.id)).state).toBe("running")
      expect(yield* repo.snoozeMany([])).toEqual([])
      expect(yield* repo.snoozeMany([
        { claim: c2, delay: "1 hour" },
        { claim: c1, delay: 0 },
        { claim: c0, delay: MAX_DELAY_MS }
      ])).toEqual(["snoozed", "stale", "snoozed"])
      expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 2, running: 0 })
    })))
}

const snoozeAfterRetryAndErrors = (backend: Backend) => {
  const { run } = storeContext(backend)
  it.live("a dead item retried gets a fresh allowance of snoozes, as of attempts", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("job", {})
      expect(yield* repo.snooze(yield* claimOne, 0)).toBe("snoozed")
      const claim = yield* claimOne
      expect(claim.snoozes).toBe(1)
      expect(yield* repo.fail(claim, "SnoozeLimit: snoozed 1 times", { _tag: "Dead" })).toBe("dead")
      expect(yield* getItem(added.id)).toMatchObject({ state: "dead", attempts: 1, snoozes: 1 })
      expect(yield* repo.retryDead({ ids: [added.id] })).toEqual([added.id])
      expect(yield* getItem(added.id)).toMatchObject({ state: "waiting", attempts: 0, snoozes: 0 })
    })))

  it.live("a snooze on a dropped table fails with a typed StorageError", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueue("job", {})
      const claim = yield* claimOne
      yield* dropTable
      const error = yield* Effect.flip(repo.snooze(claim, 0))
      expect(error).toBeInstanceOf(StorageError)
      expect((error as StorageError).operation).toBe("snooze")
    })))
}

export const snoozeSuite = (backend: Backend) => {
  describe("snooze", () => {
    snoozeAndStale(backend)
    snoozeTwinsAndBatches(backend)
    snoozeAfterRetryAndErrors(backend)
  })
}
