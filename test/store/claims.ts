/**
 * The shared store suite: claims and their outcomes (lease, complete, fail, release, extend) and the fencing of every write by the claim's token.
 * Run on every backend by test/store/sqlite.test.ts and test/store/pg.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, countState, expireLease, makeDue, setRow } from "../support/db.js"
import { dbNow, expectAround } from "../support/harness.js"
import { getItem, storeContext } from "../support/store.js"

const Repo = QueueRepo.QueueRepo

const leasesAndTheReference = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  it.live("a claimed item is leased: a second claimer skips it until the lease runs out", () =>
    run(Effect.gen(function*() {
      const repo = yield* QueueRepo.QueueRepo
      const added = yield* repo.enqueue("email.send", { to: "a@example.com" })
      expect(added._tag).toBe("Enqueued")
      const [first] = yield* repo.claim({ worker: "w1", limit: 10, lease })
      expect(first.id).toBe(added.id)
      expect(first.attempt).toBe(1)
      expect(JSON.parse(first.payloadJson)).toEqual({ to: "a@example.com" })
      expect(yield* repo.claim({ worker: "w2", limit: 10, lease })).toEqual([])
      yield* expireLease(first.id)
      const [again] = yield* repo.claim({ worker: "w2", limit: 10, lease })
      expect(again.id).toBe(first.id)
      expect(again.attempt).toBe(2)
      expect(again.token).not.toBe(first.token)
      expect(yield* repo.get(first.id)).toSatisfy(Option.isSome)
    })))

  it.live("the reference's own test: once per key, leased, backoff, dead after the last attempt, dead holds no key", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const payload = { repo_id: 7 }
      const added = yield* repo.enqueue("mirror.refresh", payload, { key: "7" })
      expect(added._tag).toBe("Enqueued")
      expect(yield* repo.enqueue("mirror.refresh", payload, { key: "7" })).toEqual({ _tag: "Deduplicated", id: added.id })

      const got = yield* repo.claim({ worker: "a", limit: 10, lease: "60 seconds" })
      expect(got.map((c) => [c.id, c.attempt, c.worker])).toEqual([[added.id, 1, "a"]])
      expect(yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })).toEqual([])

      // Backoff: waiting again, scheduled a minute out on the database's clock, not claimable.
      const before = yield* dbNow
      expect(yield* repo.fail(got[0], "the disk is full", { _tag: "Retry", delay: "1 minute" })).toBe("retried")
      const after = yield* dbNow
      const waiting = yield* getItem(added.id)
      expect(waiting.state).toBe("waiting")
      expect(waiting.lastError).toBe("the disk is full")
      expect(waiting.attempts).toBe(1)
      expect(waiting.claimedBy).toBeNull()
      expect(waiting.leaseUntil).toBeNull()
      expectAround(waiting.runAt, before + 60_000, after + 60_000, 50)
      expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 1, running: 0, dead: 0 })
      expect(yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })).toEqual([])

      // Due: claimable again, attempt 2, with the previous error.
      yield* makeDue(added.id)
      const [second] = yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })
      expect(second.id).toBe(added.id)
      expect(second.attempt).toBe(2)
      expect(second.lastError).toBe("the disk is full")
      expect(yield* repo.fail(second, "still full", { _tag: "Retry", delay: "2 minutes" })).toBe("retried")
      expect(yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })).toEqual([])

      // As the reference does: jump to the last attempt (default 8) by editing the row.
      yield* setRow(added.id, { run_at: 0, attempts: QueueRepo.DEFAULT_MAX_ATTEMPTS - 1 })
      const [last] = yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })
      expect(last.attempt).toBe(QueueRepo.DEFAULT_MAX_ATTEMPTS)
      expect(last.maxAttempts).toBe(QueueRepo.DEFAULT_MAX_ATTEMPTS)
      // The last attempt: a Retry still ends dead.
      expect(yield* repo.fail(last, "still full", { _tag: "Retry", delay: "30 seconds" })).toBe("dead")
      const dead = yield* getItem(added.id)
      expect(dead.state).toBe("dead")
      expect(dead.lastError).toBe("still full")
      expect(dead.attempts).toBe(QueueRepo.DEFAULT_MAX_ATTEMPTS)
      expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 0, running: 0, dead: 1 })
      expect(yield* repo.claim({ worker: "b", limit: 10, lease })).toEqual([])

      // A dead item does not hold its key.
      const again = yield* repo.enqueue("mirror.refresh", payload, { key: "7" })
      expect(again._tag).toBe("Enqueued")
      expect(again.id).not.toBe(added.id)
      expect(yield* countState("waiting")).toBe(1)
      expect(yield* countState("dead")).toBe(1)
    })))
}

const claimOrder = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  it.live("claim order: priority first, then run-after, then id; the limit is respected", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const t = Date.now() - 60_000
      const a = yield* repo.enqueue("job", "a", { runAt: t + 1_000 })
      const b = yield* repo.enqueue("job", "b", { runAt: t + 3_000, priority: 5 })
      const c = yield* repo.enqueue("job", "c", { runAt: new Date(t + 2_000), priority: 5 })
      const d = yield* repo.enqueue("job", "d", { runAt: t + 1_000 })
      const e = yield* repo.enqueue("job", "e", { runAt: t, priority: -3 })
      const f = yield* repo.enqueue("job", "f", { runAt: t + 500, priority: 5 })
      const expected = [f.id, c.id, b.id, a.id, d.id, e.id]
      // One at a time: each claim must pick the first due item in claim order.
      const oneByOne: Array<number> = []
      for (let i = 0; i < 3; i++) {
        const claims = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(claims).toHaveLength(1)
        oneByOne.push(claims[0].id)
      }
      expect(oneByOne).toEqual(expected.slice(0, 3))
      const rest = yield* repo.claim({ worker: "w", limit: 2, lease })
      expect(rest.map((r) => r.id)).toEqual(expected.slice(3, 5))
      const last = yield* repo.claim({ worker: "w", limit: 100, lease })
      expect(last.map((r) => r.id)).toEqual([e.id])
      expect(yield* countState("running")).toBe(6)
    })))

  it.live("claim order across priorities skips the items not yet due of each, and an empty claim takes nothing", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const t = Date.now() - 60_000
      const later = Date.now() + 3_600_000
      // Each priority holds items not yet due after (and before, by id) its due ones:
      // the claim walks priorities 7, 3, 0, -2 and must take only the due ones, in order.
      yield* repo.enqueueMany([7, 3, 0, -2].map((priority) => ({ kind: "job", payload: `later ${priority}`, priority, runAt: later })))
      const due = yield* repo.enqueueMany([
        { kind: "job", payload: "p3 second", priority: 3, runAt: t + 2_000 },
        { kind: "job", payload: "p0", priority: 0, runAt: t },
        { kind: "job", payload: "p3 first", priority: 3, runAt: t + 1_000 },
        { kind: "job", payload: "p-2", priority: -2, runAt: t }
      ])
      yield* repo.enqueueMany([7, 3, 0, -2].map((priority) => ({ kind: "job", payload: `later too ${priority}`, priority, runAt: later + 1 })))
      const ids = due.map((r) => r.id)
      const first = yield* repo.claim({ worker: "w", limit: 2, lease })
      expect(first.map((c) => c.id)).toEqual([ids[2], ids[0]])
      const rest = yield* repo.claim({ worker: "w", limit: 10, lease })
      expect(rest.map((c) => c.id)).toEqual([ids[1], ids[3]])
      expect(yield* repo.claim({ worker: "w", limit: 10, lease })).toEqual([])
      expect(yield* countState("waiting")).toBe(8)
    })))

  it.live("claim order past 64 priorities: the due items of every priority, in order, none not yet due", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const t = Date.now() - 60_000
      const later = Date.now() + 3_600_000
      // 70 priorities hold only items not yet due; below them, and among them, due ones.
      yield* repo.enqueueMany(Array.from({ length: 70 }, (_, i) => ({ kind: "job", payload: `later ${i}`, priority: 200 - i, runAt: later })))
      const due = yield* repo.enqueueMany(Array.from({ length: 70 }, (_, i) => ({ kind: "job", payload: `due ${i}`, priority: 100 - i, runAt: t + i })))
      const bottom = yield* repo.enqueue("job", "due at the bottom", { priority: -5, runAt: t })
      const first = yield* repo.claim({ worker: "w", limit: 3, lease })
      expect(first.map((c) => c.id)).toEqual(due.slice(0, 3).map((r) => r.id))
      const rest = yield* repo.claim({ worker: "w", limit: 100, lease })
      expect(rest.map((c) => c.id)).toEqual([...due.slice(3).map((r) => r.id), bottom.id])
      expect(yield* repo.claim({ worker: "w", limit: 100, lease })).toEqual([])
      expect(yield* countState("waiting")).toBe(70)
    })))

  it.live("an item whose lease ran out is due again, and takes its place in claim order", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const low = yield* repo.enqueue("job", "low", { priority: 1 })
      const [claimed] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      expect(claimed.id).toBe(low.id)
      const high = yield* repo.enqueue("job", "high", { priority: 9 })
      yield* expireLease(low.id)
      // Both are due: the higher priority goes first.
      const [first] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(first.id).toBe(high.id)
      const [second] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(second.id).toBe(low.id)
      expect(second.attempt).toBe(2)
      expect(second.worker).toBe("w2")
      expect((yield* getItem(low.id)).claimedBy).toBe("w2")
    })))
}

const batchesAndFields = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  it.live("a batch takes expired and waiting items together, up to the limit, with the kinds filter", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueueMany([
        { kind: "a", payload: "a1", priority: 3 },
        { kind: "a", payload: "a2", priority: 1 },
        { kind: "b", payload: "b1", priority: 2 }
      ])
      const first = yield* repo.claim({ worker: "w1", limit: 3, lease })
      expect(first.map((c) => c.payloadJson)).toEqual(["\"a1\"", "\"b1\"", "\"a2\""])
      for (const c of first) yield* expireLease(c.id)
      yield* repo.enqueueMany([
        { kind: "a", payload: "a3", priority: 2 },
        { kind: "b", payload: "b2", priority: 5 }
      ])
      // Only kind a: the expired a1 and a2 and the waiting a3, in claim order, limit 2.
      const onlyA = yield* repo.claim({ worker: "w2", limit: 2, lease, kinds: ["a"] })
      expect(onlyA.map((c) => c.payloadJson)).toEqual(["\"a1\"", "\"a3\""])
      expect(onlyA.map((c) => c.attempt)).toEqual([2, 1])
      const rest = yield* repo.claim({ worker: "w2", limit: 10, lease })
      expect(rest.map((c) => c.payloadJson)).toEqual(["\"b2\"", "\"b1\"", "\"a2\""])
      expect(yield* repo.claim({ worker: "w3", limit: 10, lease })).toEqual([])
    })))

  it.live("a claim counts the attempt, carries the item's fields and leases on the database's clock", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("email.send", { n: 1 }, { key: "k1", priority: 4, maxAttempts: 5 })
      const before = yield* dbNow
      const [claim] = yield* repo.claim({ worker: "host:123", limit: 5, lease: "45 seconds" })
      const after = yield* dbNow
      expect(claim).toMatchObject({
        id: added.id,
        kind: "email.send",
        key: "k1",
        priority: 4,
        attempt: 1,
        maxAttempts: 5,
        worker: "host:123",
        lastError: null
      })
      expectAround(claim.leaseUntil, before + 45_000, after + 45_000, 50)
      const item = yield* getItem(added.id)
      expect(item).toMatchObject({ state: "running", attempts: 1, claimedBy: "host:123", leaseUntil: claim.leaseUntil })
    })))

  it.live("every claim has a fresh token; a release gives the attempt back", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueue("job", {})
      const [c1] = yield* repo.claim({ worker: "w", limit: 1, lease })
      expect(yield* repo.release(c1)).toBe("released")
      const released = yield* getItem(c1.id)
      expect(released).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null, leaseUntil: null })
      const [c2] = yield* repo.claim({ worker: "w", limit: 1, lease })
      expect(c2.id).toBe(c1.id)
      expect(c2.attempt).toBe(1)
      expect(c2.token).not.toBe(c1.token)
      yield* expireLease(c2.id)
      const [c3] = yield* repo.claim({ worker: "w", limit: 1, lease })
      expect(c3.attempt).toBe(2)
      expect(new Set([c1.token, c2.token, c3.token]).size).toBe(3)
      // Only the latest token completes it.
      expect(yield* repo.complete(c1)).toBe(false)
      expect(yield* repo.complete(c2)).toBe(false)
      expect(yield* repo.complete(c3)).toBe(true)
      // Kept as done (default retention), who ran it kept; complete again is stale.
      expect(yield* getItem(c3.id)).toMatchObject({ state: "done", attempts: 2, claimedBy: "w", leaseUntil: null })
      expect(yield* repo.complete(c3)).toBe(false)
    })))
}

const filtersAndOutcomes = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  it.live("the kinds filter claims only those kinds", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const a = yield* repo.enqueue("a.one", 1, { priority: 10 })
      const b = yield* repo.enqueue("b.two", 2)
      const c = yield* repo.enqueue("c.three", 3)
      const got = yield* repo.claim({ worker: "w", limit: 10, lease, kinds: ["b.two", "c.three"] })
      expect(got.map((g) => g.id).sort((x, y) => x - y)).toEqual([b.id, c.id])
      expect(yield* repo.claim({ worker: "w", limit: 10, lease, kinds: ["nothing.here"] })).toEqual([])
      expect((yield* getItem(a.id)).state).toBe("waiting")
      const rest = yield* repo.claim({ worker: "w", limit: 10, lease, kinds: [] })
      expect(rest).toEqual([])
      expect((yield* repo.claim({ worker: "w", limit: 10, lease })).map((g) => g.id)).toEqual([a.id])
    })))

  it.live("a scheduled item is not claimable until due; delay and runAt are stored", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const before = yield* dbNow
      const later = yield* repo.enqueue("job", {}, { delay: "10 minutes" })
      const after = yield* dbNow
      const at = Date.now() + 3_600_000
      const fixed = yield* repo.enqueue("job", {}, { runAt: new Date(at) })
      expectAround((yield* getItem(later.id)).runAt, before + 600_000, after + 600_000, 50)
      expect((yield* getItem(fixed.id)).runAt).toBe(at)
      expect(yield* repo.claim({ worker: "w", limit: 10, lease })).toEqual([])
      yield* makeDue(fixed.id)
      expect((yield* repo.claim({ worker: "w", limit: 10, lease })).map((c) => c.id)).toEqual([fixed.id])
    })))

  it.live("extend renews the lease from now; complete keeps the item as done, finished now, claimed_by kept", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueue("job", {})
      const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "5 seconds" })
      const before = yield* dbNow
      expect(yield* repo.extend(claim, "10 minutes")).toBe(true)
      const after = yield* dbNow
      expectAround((yield* getItem(claim.id)).leaseUntil!, before + 600_000, after + 600_000, 50)
      expect(yield* repo.extendMany([claim], 60_000)).toEqual([true])
      const beforeDone = yield* dbNow
      expect(yield* repo.completeMany([claim])).toEqual([true])
      const afterDone = yield* dbNow
      const done = yield* getItem(claim.id)
      expect(done).toMatchObject({ state: "done", claimedBy: "w", leaseUntil: null, result: null, errors: [] })
      expectAround(done.finishedAt!, beforeDone, afterDone, 50)
      expect(yield* countAll).toBe(1)
      expect(yield* countState("done")).toBe(1)
      // Nothing claims a done item.
      expect(yield* repo.claim({ worker: "w", limit: 1, lease })).toEqual([])
    })))

  it.live("a fail with Dead is dead at once, whatever attempts remain", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueue("no.such.kind", {}, { maxAttempts: 8 })
      const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
      expect(yield* repo.fail(claim, "unknown kind", { _tag: "Dead" })).toBe("dead")
      expect(yield* getItem(claim.id)).toMatchObject({ state: "dead", attempts: 1, lastError: "unknown kind" })
      expect(yield* repo.claim({ worker: "w", limit: 1, lease })).toEqual([])
    })))

  it.live("batch operations apply per item, in input order", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueueMany([0, 1, 2, 3, 4, 5].map((n) => ({ kind: "job", payload: n, priority: 10 - n })))
      const claims = yield* repo.claim({ worker: "w", limit: 6, lease })
      expect(claims.map((c) => JSON.parse(c.payloadJson))).toEqual([0, 1, 2, 3, 4, 5])
      const [c0, c1, c2, c3, c4, c5] = claims
      expect(yield* repo.completeMany([c0, c1])).toEqual([true, true])
      expect(yield* repo.completeMany([c0, c2])).toEqual([false, true])
      expect(yield* repo.failMany([
        { claim: c3, error: "x", next: { _tag: "Retry", delay: "1 hour" } },
        { claim: c4, error: "y", next: { _tag: "Dead" } }
      ])).toEqual(["retried", "dead"])
      expect(yield* repo.releaseMany([c5, c3])).toEqual(["released", "stale"])
      expect(yield* repo.extendMany([c5, c4], "1 minute")).toEqual([false, false])
      expect(yield* repo.completeMany([])).toEqual([])
      expect(yield* repo.failMany([])).toEqual([])
      expect(yield* repo.releaseMany([])).toEqual([])
      expect(yield* repo.extendMany([], "1 minute")).toEqual([])
      expect(yield* repo.stats).toMatchObject({ due: 1, scheduled: 1, running: 0, dead: 1 })
    })))
}

const enqueueAndClaim = (backend: Backend) => {
  describe("enqueue and claim", () => {
    leasesAndTheReference(backend)
    claimOrder(backend)
    batchesAndFields(backend)
    filtersAndOutcomes(backend)
  })
}

const fencing = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  describe("fencing", () => {
    // w1 claims; its lease runs out; w2 claims the item. w1's claim is stale.
    const lostLease = Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("job", { n: 1 }, { key: "k" })
      const [stale] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      yield* expireLease(added.id)
      const [fresh] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(fresh.id).toBe(added.id)
      const before = yield* getItem(added.id)
      expect(before).toMatchObject({ state: "running", claimedBy: "w2", attempts: 2 })
      return { stale, fresh, before }
    })

    it.live("a stale complete returns false and changes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        expect(yield* repo.complete(stale)).toBe(false)
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.complete(fresh)).toBe(true)
      })))

    it.live("a stale fail returns stale and changes nothing (Retry or Dead)", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        expect(yield* repo.fail(stale, "late", { _tag: "Retry", delay: "1 minute" })).toBe("stale")
        expect(yield* repo.fail(stale, "late", { _tag: "Dead" })).toBe("stale")
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.fail(fresh, "real", { _tag: "Dead" })).toBe("dead")
      })))

    it.live("a stale extend returns false and changes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        expect(yield* repo.extend(stale, "1 hour")).toBe(false)
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.extend(fresh, "1 hour")).toBe(true)
      })))

    it.live("a stale release returns stale and changes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        // A twin waiting must not make the stale release delete the item either.
        yield* repo.enqueue("job", { twin: true }, { key: "k" })
        expect(yield* repo.release(stale)).toBe("stale")
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.release(fresh)).toBe("absorbed")
      })))

    // One batch can hold two claims of one item: a pool claimed back an item
    // whose lease ran out while it ran it (internal/store/fence.ts). Only the
    // current token applies, in whichever order the two come.
    it.live("a batch with a stale and the current claim of one item: only the current one applies, in either order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const pair = Effect.map(lostLease, ({ fresh, stale }) => ({ fresh, stale }))
        {
          const { fresh, stale } = yield* pair
          expect(yield* repo.extendMany([stale, fresh], "1 hour")).toEqual([false, true])
          expect(yield* repo.extendMany([fresh, stale], "1 hour")).toEqual([true, false])
          expect(yield* repo.completeMany([stale, fresh])).toEqual([false, true])
        }
        {
          const { fresh, stale } = yield* pair
          expect(yield* repo.completeMany([fresh, stale])).toEqual([true, false])
        }
        {
          const { fresh, stale } = yield* pair
          const failure = (claim: typeof fresh) => ({ claim, error: "x", next: { _tag: "Dead" } as const })
          expect(yield* repo.failMany([failure(stale), failure(fresh)])).toEqual(["stale", "dead"])
        }
        {
          const { fresh, stale } = yield* pair
          expect(yield* repo.releaseMany([fresh, stale])).toEqual(["released", "stale"])
          yield* repo.cancel([fresh.id]) // frees the key for the next pair
        }
        {
          const { fresh, stale } = yield* pair
          expect(yield* repo.snoozeMany([{ claim: stale, delay: "1 minute" }, { claim: fresh, delay: "1 minute" }]))
            .toEqual(["stale", "snoozed"])
        }
      })))

    // PostgreSQL finds each claim's token and values by its id's place in the
    // batch, the batch sorted by id first (src/internal/sql/held.ts): a batch
    // in any order still applies each claim's own values to its own item.
    it.live("a batch out of claim order: every claim applies, each with its own result, error or delay", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const claimSix = Effect.gen(function*() {
          yield* repo.enqueueMany(Array.from({ length: 6 }, (_, n) => ({ kind: "job", payload: n })))
          const claims = yield* repo.claim({ worker: "w", limit: 6, lease })
          expect(claims).toHaveLength(6)
          return [3, 0, 5, 1, 4, 2].map((i) => claims[i])
        })
        {
          const claims = yield* claimSix
          const results = claims.map((claim) => ({ claim, result: { id: claim.id } }))
          expect(yield* repo.completeMany(results)).toEqual(claims.map(() => true))
          for (const c of claims) expect((yield* getItem(c.id)).result).toEqual({ id: c.id })
        }
        {
          const claims = yield* claimSix
          const failures = claims.map((claim) => ({ claim, error: `e${claim.id}`, next: { _tag: "Dead" } as const }))
          expect(yield* repo.failMany(failures)).toEqual(claims.map(() => "dead"))
          for (const c of claims) expect((yield* getItem(c.id)).lastError).toBe(`e${c.id}`)
        }
        {
          const claims = yield* claimSix
          expect(yield* repo.extendMany(claims, "1 hour")).toEqual(claims.map(() => true))
          const now = yield* dbNow
          const hours = (n: number) => (n + 1) * 3_600_000
          expect(yield* repo.snoozeMany(claims.map((claim, n) => ({ claim, delay: hours(n) }))))
            .toEqual(claims.map(() => "snoozed"))
          for (const [n, c] of claims.entries()) {
            const item = yield* getItem(c.id)
            expect(item.state).toBe("waiting")
            expectAround(item.runAt, now + hours(n), now + hours(n))
          }
        }
      })))

    it.live("a claim on a completed item's id is stale even if the id could be reused", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", 1)
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(yield* repo.complete(claim)).toBe(true)
        const next = yield* repo.enqueue("job", 2)
        expect(next.id).not.toBe(claim.id)
        const [other] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(yield* repo.complete(claim)).toBe(false)
        expect(yield* repo.fail(claim, "x", { _tag: "Dead" })).toBe("stale")
        expect((yield* getItem(other.id)).state).toBe("running")
      })))
  })
}

/** Registers the claims tests for a backend. */
export const claimsSuite = (backend: Backend) => {
  enqueueAndClaim(backend)
  fencing(backend)
}
