/**
 * Part of the shared store suite (run from ./suite.ts on every
 * backend): items a person cancels (`QueueRepo.cancel`), and the handler's
 * Cancel outcome through `fail` (state cancelled, final).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { InvalidInput, type InvalidField } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countState, expireLease, makeDue, unsafe } from "../support/db.js"
import { withRepo } from "../support/harness.js"

const Repo = QueueRepo.QueueRepo
const lease = "30 seconds"

const getItem = (id: number) =>
  Effect.flatMap(Repo, (repo) => repo.get(id)).pipe(Effect.map(Option.getOrThrow))

/** The stored claim token (lease_seq) of an item. */
const token = (id: number) =>
  unsafe<{ lease_seq: number | string }>(`SELECT lease_seq FROM docket_items WHERE id = ${Number(id)}`).pipe(
      Effect.map((rows) => Number(rows[0].lease_seq))
    )

const expectInvalid = <A, E, R>(effect: Effect.Effect<A, E, R>, field: InvalidField) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    expect(error).toBeInstanceOf(InvalidInput)
    expect((error as InvalidInput).field).toBe(field)
  })

/** What the tests below share: a fresh migrated database for each (`run`) and their fixtures. */
const context = (backend: Backend) => {
  const run = <A, E>(program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>) => withRepo(backend, program)

  /** An item claimed by "holder" (the claim returned). */
  const runningItem = (kind = "job", key?: string) =>
    Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue(kind, { running: true }, { key })
      const [claim] = yield* repo.claim({ worker: "holder", limit: 1, lease, kinds: [kind] })
      expect(claim.id).toBe(added.id)
      return claim
    })
  return { run, runningItem }
}

const cancelWaitingAndRunning = (backend: Backend) => {
  const { run, runningItem } = context(backend)
  it.live("a waiting and a scheduled item are cancelled at once, kept with the reason, and never claimed", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const due = yield* repo.enqueue("mail", { n: 1 })
      const later = yield* repo.enqueue("mail", { n: 2 }, { delay: "1 hour" })
      const other = yield* repo.enqueue("report", { n: 3 })
      expect(yield* repo.cancel([due.id, later.id], { reason: "the customer left" })).toEqual(["cancelled", "cancelled"])
      // A cancelled scheduled item is not waited for.
      expect(yield* repo.nextDueIn).toEqual(Option.none())
      for (const id of [due.id, later.id]) {
        expect(yield* getItem(id)).toMatchObject({
          state: "cancelled",
          lastError: "Cancelled: the customer left",
          attempts: 0,
          claimedBy: null,
          leaseUntil: null
        })
      }
      // Due or not, nothing claims a cancelled item.
      yield* makeDue(later.id)
      const claims = yield* repo.claim({ worker: "w", limit: 10, lease })
      expect(claims.map((c) => c.id)).toEqual([other.id])
      // Without a reason, "Cancelled".
      yield* repo.complete(claims[0])
      const plain = yield* repo.enqueue("report", { n: 4 })
      expect(yield* repo.cancel([plain.id])).toEqual(["cancelled"])
      expect((yield* getItem(plain.id)).lastError).toBe("Cancelled")
      expect(yield* repo.stats).toEqual({
        due: 0,
        scheduled: 0,
        running: 0,
        done: 1,
        dead: 0,
        cancelled: 3,
        byKind: {
          mail: { due: 0, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 2 },
          report: { due: 0, scheduled: 0, running: 0, done: 1, dead: 0, cancelled: 1 }
        }
      })
    })))

  it.live("a running item is cancelled; its holder's complete, fail, release and extend are refused as stale", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const claim = yield* runningItem()
      expect(yield* repo.cancel([claim.id], { reason: "stop" })).toEqual(["cancelledRunning"])
      // The claim token moved: the holder is fenced out like a lost lease.
      expect(yield* token(claim.id)).toBe(claim.token + 1)
      const cancelled = yield* getItem(claim.id)
      expect(cancelled).toMatchObject({ state: "cancelled", lastError: "Cancelled: stop", attempts: 1, leaseUntil: null })
      expect(yield* repo.complete(claim)).toBe(false)
      expect(yield* repo.fail(claim, "late", { _tag: "Retry", delay: 0 })).toBe("stale")
      expect(yield* repo.fail(claim, "late", { _tag: "Dead" })).toBe("stale")
      expect(yield* repo.fail(claim, "late", { _tag: "Cancel" })).toBe("stale")
      expect(yield* repo.release(claim)).toBe("stale")
      expect(yield* repo.extend(claim, "1 hour")).toBe(false)
      expect(yield* repo.completeMany([claim])).toEqual([false])
      expect(yield* repo.extendMany([claim], "1 hour")).toEqual([false])
      expect(yield* getItem(claim.id)).toEqual(cancelled)
      // A claim of the same token after the cancel (a forged one) is refused too.
      expect(yield* repo.complete({ ...claim, token: claim.token + 1 })).toBe(false)
      expect(yield* repo.claim({ worker: "w", limit: 10, lease })).toEqual([])
      expect(yield* countState("running")).toBe(0)
    })))
}

const cancelExpiredAndFinished = (backend: Backend) => {
  const { run, runningItem } = context(backend)
  it.live("a running item whose lease ran out is cancelled too, and never claimed again", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const claim = yield* runningItem()
      yield* expireLease(claim.id)
      expect(yield* repo.cancel([claim.id])).toEqual(["cancelledRunning"])
      expect(yield* repo.claim({ worker: "w", limit: 10, lease })).toEqual([])
      expect((yield* getItem(claim.id)).state).toBe("cancelled")
    })))

  it.live("dead, cancelled and unknown ids change nothing; one outcome per id in input order, repeated ids too", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const dead = yield* runningItem("doomed")
      expect(yield* repo.fail(dead, "broken", { _tag: "Dead" })).toBe("dead")
      const gone = yield* repo.enqueue("job", 1)
      expect(yield* repo.cancel([gone.id])).toEqual(["cancelled"])
      const waiting = yield* repo.enqueue("job", 2)
      const running = yield* runningItem("long")
      const before = { dead: yield* getItem(dead.id), gone: yield* getItem(gone.id) }
      const outcomes = yield* repo.cancel([dead.id, 999_999, waiting.id, gone.id, running.id, waiting.id, 999_999])
      expect(outcomes).toEqual(["finished", "unknown", "cancelled", "finished", "cancelledRunning", "cancelled", "unknown"])
      // The finished ones are as they were (their error, their update time, their token).
      expect(yield* getItem(dead.id)).toEqual(before.dead)
      expect(yield* getItem(gone.id)).toEqual(before.gone)
      // Unknown ids alone: nothing to do, nothing fails.
      expect(yield* repo.cancel([123_456_789])).toEqual(["unknown"])
      // A dead item stays for a person to retry or delete, and a retried one can be cancelled.
      expect(yield* repo.retryDead({ ids: [dead.id] })).toEqual([dead.id])
      expect(yield* repo.cancel([dead.id])).toEqual(["cancelled"])
    })))

  it.live("a cancelled keyed item holds no key: its waiting twin is claimed at once, a new enqueue is added", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* runningItem("mirror", "repo-1")
      const twin = yield* repo.enqueue("mirror", { push: 2 }, { key: "repo-1" })
      expect(twin._tag).toBe("Enqueued")
      // The twin waits while the running item holds a live lease.
      expect(yield* repo.claim({ worker: "w", limit: 10, lease })).toEqual([])
      expect(yield* repo.cancel([first.id])).toEqual(["cancelledRunning"])
      const [next] = yield* repo.claim({ worker: "w", limit: 10, lease })
      expect(next.id).toBe(twin.id)
      // A waiting keyed item cancelled frees its key for the next enqueue.
      const queued = yield* repo.enqueue("mirror", { push: 3 }, { key: "repo-1" })
      expect(yield* repo.cancel([queued.id])).toEqual(["cancelled"])
      const again = yield* repo.enqueue("mirror", { push: 4 }, { key: "repo-1" })
      expect(again._tag).toBe("Enqueued")
      expect(again.id).not.toBe(queued.id)
    })))
}

const cancelRefusedOrUndone = (backend: Backend) => {
  const { run, runningItem } = context(backend)
  it.live("bad input is refused with InvalidInput before anything is written", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("job", 1)
      yield* expectInvalid(repo.cancel([]), "ids")
      for (const id of [0, -1, 1.5, NaN, Infinity, 2 ** 63]) yield* expectInvalid(repo.cancel([added.id, id]), "ids")
      yield* expectInvalid(repo.cancel(Array.from({ length: 10_001 }, (_, i) => i + 1)), "ids")
      for (const reason of ["", "   ", "x".repeat(1001), "nul\u0000", "lone \ud800"]) {
        yield* expectInvalid(repo.cancel([added.id], { reason }), "reason")
      }
      yield* expectInvalid(repo.cancel([added.id], { reason: 42 as unknown as string }), "reason")
      expect(yield* getItem(added.id)).toMatchObject({ state: "waiting", lastError: null })
      // A hostile reason is stored exactly.
      const hostile = `it's "quoted"; DROP TABLE docket_items; -- ✓`
      expect(yield* repo.cancel([added.id], { reason: hostile })).toEqual(["cancelled"])
      expect((yield* getItem(added.id)).lastError).toBe(`Cancelled: ${hostile}`)
    })))

  it.live("a cancel inside the caller's transaction is undone with it", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const sql = yield* SqlClient.SqlClient
      const waiting = yield* repo.enqueue("job", 1)
      const running = yield* runningItem("long")
      const undone = yield* Effect.either(
        sql.withTransaction(Effect.zipRight(repo.cancel([waiting.id, running.id]), Effect.fail("undo" as const)))
      )
      expect(Either.isLeft(undone)).toBe(true)
      expect((yield* getItem(waiting.id)).state).toBe("waiting")
      expect((yield* getItem(running.id)).state).toBe("running")
      expect(yield* repo.complete(running)).toBe(true)
      const kept = yield* sql.withTransaction(repo.cancel([waiting.id]))
      expect(kept).toEqual(["cancelled"])
      expect((yield* getItem(waiting.id)).state).toBe("cancelled")
    })))
}

const cancel = (backend: Backend) => {
  describe("cancel", () => {
    cancelWaitingAndRunning(backend)
    cancelExpiredAndFinished(backend)
    cancelRefusedOrUndone(backend)
  })
}

const cancelOutcome = (backend: Backend) => {
  const { run, runningItem } = context(backend)
  describe("the handler's Cancel outcome: fail with next Cancel", () => {
    it.live("cancelled, final, whatever attempts remain; a waiting twin does not absorb it", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const claim = yield* runningItem("job", "k")
        yield* repo.enqueue("job", { twin: true }, { key: "k" })
        expect(yield* repo.fail(claim, "Cancel: user left", { _tag: "Cancel" })).toBe("cancelled")
        expect(yield* getItem(claim.id)).toMatchObject({
          state: "cancelled",
          lastError: "Cancel: user left",
          attempts: 1,
          claimedBy: null,
          leaseUntil: null
        })
        // Its own fenced write: the same claim again is stale.
        expect(yield* repo.fail(claim, "again", { _tag: "Cancel" })).toBe("stale")
        expect(yield* repo.cancel([claim.id])).toEqual(["finished"])
        expect(yield* repo.stats).toMatchObject({ due: 1, cancelled: 1, dead: 0 })
      })))

    it.live("a batch of failures: retried, dead and cancelled side by side, in input order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueueMany([1, 2, 3].map((payload) => ({ kind: "job", payload, maxAttempts: 5 })))
        const [a, b, c] = yield* repo.claim({ worker: "w", limit: 3, lease })
        const outcomes = yield* repo.failMany([
          { claim: a, error: "Cancel: a", next: { _tag: "Cancel" } },
          { claim: b, error: "Retry: b", next: { _tag: "Retry", delay: "1 minute" } },
          { claim: c, error: "Permanent: c", next: { _tag: "Dead" } }
        ])
        expect(outcomes).toEqual(["cancelled", "retried", "dead"])
        expect([(yield* getItem(a.id)).state, (yield* getItem(b.id)).state, (yield* getItem(c.id)).state])
          .toEqual(["cancelled", "waiting", "dead"])
        // listDead lists dead items only.
        expect((yield* repo.listDead()).map((i) => i.id)).toEqual([c.id])
      })))
  })
}

export const cancelSuite = (backend: Backend) => {
  cancel(backend)
  cancelOutcome(backend)
}
