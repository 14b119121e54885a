/**
 * The shared store suite: items (enqueue and its dedupe, enqueueMany, get, stats, nextDueIn), values stored exactly, enqueues inside a transaction.
 * Run on every backend by test/store/sqlite.test.ts and test/store/pg.test.ts.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, countState, expireLease, makeDue, setRow } from "../support/db.js"
import { dbNow, expectAround } from "../support/harness.js"
import { getItem, storeContext } from "../support/store.js"

const Repo = QueueRepo.QueueRepo

const dedupeWhileWaitingOrRunning = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  it.live("same kind and key while waiting: Deduplicated with the waiting id; another kind is separate", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("mirror.refresh", { n: 1 }, { key: "repo-7" })
      expect(first._tag).toBe("Enqueued")
      const second = yield* repo.enqueue("mirror.refresh", { n: 2 }, { key: "repo-7", priority: 9 })
      expect(second).toEqual({ _tag: "Deduplicated", id: first.id })
      const other = yield* repo.enqueue("email.send", { n: 3 }, { key: "repo-7" })
      expect(other._tag).toBe("Enqueued")
      expect(other.id).not.toBe(first.id)
      const unkeyed = yield* repo.enqueue("mirror.refresh", { n: 4 })
      expect(unkeyed._tag).toBe("Enqueued")
      expect(yield* countAll).toBe(3)
      // The waiting item is kept as it was.
      expect(yield* getItem(first.id)).toMatchObject({ payload: { n: 1 }, priority: 0 })
    })))

  it.live("an enqueue while the keyed item RUNS is kept, and runs after it (not beside it)", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("mirror.refresh", { push: 1 }, { key: "repo-7" })
      const [running] = yield* repo.claim({ worker: "w1", limit: 10, lease })
      expect(running.id).toBe(first.id)
      const second = yield* repo.enqueue("mirror.refresh", { push: 2 }, { key: "repo-7" })
      expect(second._tag).toBe("Enqueued")
      expect(second.id).not.toBe(first.id)
      // A third enqueue finds the waiting twin.
      expect(yield* repo.enqueue("mirror.refresh", { push: 3 }, { key: "repo-7" })).toEqual({
        _tag: "Deduplicated",
        id: second.id
      })
      // Not claimable while the running one holds a live lease (an unrelated item is).
      const other = yield* repo.enqueue("mirror.refresh", { other: true }, { key: "repo-8" })
      expect((yield* repo.claim({ worker: "w2", limit: 10, lease })).map((c) => c.id)).toEqual([other.id])
      expect(yield* repo.claim({ worker: "w2", limit: 10, lease })).toEqual([])
      // Extending the running one keeps it blocked.
      expect(yield* repo.extend(running, "1 minute")).toBe(true)
      expect(yield* repo.claim({ worker: "w2", limit: 10, lease })).toEqual([])
      expect(yield* repo.complete(running)).toBe(true)
      const [next] = yield* repo.claim({ worker: "w2", limit: 10, lease })
      expect(next.id).toBe(second.id)
      expect(JSON.parse(next.payloadJson)).toEqual({ push: 2 })
    })))

  it.live("a waiting twin of a running item whose lease ran out is due", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueue("mirror.refresh", 1, { key: "k" })
      const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k", priority: 5 })
      expect(yield* repo.claim({ worker: "w2", limit: 1, lease })).toEqual([])
      yield* expireLease(running.id)
      const [got] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(got.id).toBe(twin.id)
    })))
}

const dedupeAndTwins = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  it.live("a failed keyed item going back to waiting while a twin waits is absorbed", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("mirror.refresh", 1, { key: "k" })
      const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k" })
      expect(yield* repo.fail(running, "oops", { _tag: "Retry", delay: "1 second" })).toBe("absorbed")
      expect(yield* repo.get(first.id)).toEqual(Option.none())
      expect(yield* countAll).toBe(1)
      expect(yield* countState("waiting")).toBe(1)
      expect((yield* getItem(twin.id)).state).toBe("waiting")
      // The outcome is final: the stale claim changes nothing more.
      expect(yield* repo.fail(running, "oops", { _tag: "Retry", delay: 0 })).toBe("stale")
    })))

  it.live("a failed keyed item going dead while a twin waits is dead (a dead item holds no key)", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueue("mirror.refresh", 1, { key: "k", maxAttempts: 1 })
      const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k" })
      expect(yield* repo.fail(running, "oops", { _tag: "Retry", delay: 0 })).toBe("dead")
      expect((yield* getItem(running.id)).state).toBe("dead")
      expect((yield* getItem(twin.id)).state).toBe("waiting")
    })))

  it.live("a released keyed item while a twin waits is absorbed", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("mirror.refresh", 1, { key: "k" })
      const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k" })
      expect(yield* repo.release(running)).toBe("absorbed")
      expect(yield* repo.get(first.id)).toEqual(Option.none())
      expect(yield* countAll).toBe(1)
      expect((yield* getItem(twin.id)).state).toBe("waiting")
    })))

  it.live("two running twins failed or released in one batch: the first waits, the second is absorbed", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      // Two running items with one key: the first's lease ran out, so its twin became due.
      const make = Effect.gen(function*() {
        const a = yield* repo.enqueue("mirror.refresh", "a", { key: "k" })
        const [ca] = yield* repo.claim({ worker: "w1", limit: 1, lease })
        expect(ca.id).toBe(a.id)
        const b = yield* repo.enqueue("mirror.refresh", "b", { key: "k", priority: 5 })
        yield* expireLease(a.id)
        const [cb] = yield* repo.claim({ worker: "w2", limit: 1, lease })
        expect(cb.id).toBe(b.id)
        const [ca2] = yield* repo.claim({ worker: "w2", limit: 1, lease })
        expect(ca2.id).toBe(a.id)
        return [ca2, cb] as const
      })
      const [fa, fb] = yield* make
      expect(yield* repo.failMany([
        { claim: fa, error: "e", next: { _tag: "Retry", delay: 0 } },
        { claim: fb, error: "e", next: { _tag: "Retry", delay: 0 } }
      ])).toEqual(["retried", "absorbed"])
      expect(yield* countAll).toBe(1)
      expect((yield* getItem(fa.id)).state).toBe("waiting")
      expect(yield* repo.get(fb.id)).toEqual(Option.none())
      // Finish the waiting one (kept as done: it holds no key), then the same with release.
      const [left] = yield* repo.claim({ worker: "w", limit: 1, lease })
      expect(yield* repo.complete(left)).toBe(true)
      const [ra, rb] = yield* make
      expect(yield* repo.releaseMany([ra, rb])).toEqual(["released", "absorbed"])
      expect(yield* countState("waiting")).toBe(1)
      expect(yield* countState("done")).toBe(1)
      expect(yield* countAll).toBe(2)
      expect(yield* getItem(ra.id)).toMatchObject({ state: "waiting" })
    })))
}

const dedupeInABatch = (backend: Backend) => {
  const { run } = storeContext(backend)
  it.live("enqueueMany with duplicates in the batch: per-item results in input order", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const held = yield* repo.enqueue("mirror.refresh", "held", { key: "held" })
      const results = yield* repo.enqueueMany([
        { kind: "mirror.refresh", payload: 0, key: "k" },
        { kind: "mirror.refresh", payload: 1 },
        { kind: "mirror.refresh", payload: 2, key: "k" },
        { kind: "email.send", payload: 3, key: "k" },
        { kind: "mirror.refresh", payload: 4, key: "held" },
        { kind: "mirror.refresh", payload: 5, key: "k2" },
        { kind: "email.send", payload: 6, key: "k" },
        { kind: "mirror.refresh", payload: 7, key: "k" }
      ])
      expect(results.map((r) => r._tag)).toEqual([
        "Enqueued",
        "Enqueued",
        "Deduplicated",
        "Enqueued",
        "Deduplicated",
        "Enqueued",
        "Deduplicated",
        "Deduplicated"
      ])
      expect(results[2].id).toBe(results[0].id)
      expect(results[4].id).toBe(held.id)
      expect(results[6].id).toBe(results[3].id)
      expect(results[7].id).toBe(results[0].id)
      const ids = [results[0].id, results[1].id, results[3].id, results[5].id]
      expect(new Set([...ids, held.id]).size).toBe(5)
      // Ids follow input order; each row holds its own payload.
      expect([...ids].sort((a, b) => a - b)).toEqual(ids)
      for (const [index, id] of [[0, ids[0]], [1, ids[1]], [3, ids[2]], [5, ids[3]]]) {
        expect((yield* getItem(id)).payload).toBe(index)
      }
      expect(yield* countAll).toBe(5)
    })))
}

const dedupe = (backend: Backend) => {
  describe("dedupe", () => {
    dedupeWhileWaitingOrRunning(backend)
    dedupeAndTwins(backend)
    dedupeInABatch(backend)
  })
}

const enqueueMany = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  describe("enqueueMany", () => {
    it.live("stores delay, runAt, priority and maxAttempts per item; results in input order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const at = Date.now() + 7_200_000
        const before = yield* dbNow
        const results = yield* repo.enqueueMany([
          { kind: "a", payload: { i: 0 }, delay: "5 minutes", priority: 3 },
          { kind: "b", payload: { i: 1 }, key: "x", runAt: at, maxAttempts: 2 },
          { kind: "a", payload: { i: 2 }, priority: -7, maxAttempts: 1 },
          { kind: "b", payload: { i: 3 }, key: "y", delay: 1_000 }
        ])
        const after = yield* dbNow
        expect(results.map((r) => r._tag)).toEqual(["Enqueued", "Enqueued", "Enqueued", "Enqueued"])
        const items = yield* Effect.forEach(results, (r) => getItem(r.id))
        expect(items.map((i) => i.payload)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }])
        // Not given: null (the claimer decides), as a keyed batch stores it.
        expect(items.map((i) => [i.kind, i.key, i.priority, i.maxAttempts, i.state])).toEqual([
          ["a", null, 3, null, "waiting"],
          ["b", "x", 0, 2, "waiting"],
          ["a", null, -7, 1, "waiting"],
          ["b", "y", 0, null, "waiting"]
        ])
        expectAround(items[0].runAt, before + 300_000, after + 300_000, 50)
        expect(items[1].runAt).toBe(at)
        expectAround(items[2].runAt, before, after, 50)
        expectAround(items[3].runAt, before + 1_000, after + 1_000, 50)
        expect(results.map((r) => r.id)).toEqual([...results.map((r) => r.id)].sort((x, y) => x - y))
      })))

    it.live("an unkeyed batch stores each item's own kind, delay, runAt, priority and maxAttempts", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const at = Date.now() + 3_600_000
        const before = yield* dbNow
        const results = yield* repo.enqueueMany([
          { kind: "a", payload: 0, delay: 2_000, priority: 5, maxAttempts: 3 },
          { kind: "b", payload: 1, runAt: at },
          { kind: "a", payload: 2, priority: -1 },
          { kind: "c", payload: 3, delay: 0, maxAttempts: 1 }
        ])
        const after = yield* dbNow
        const items = yield* Effect.forEach(results, (r) => getItem(r.id))
        expect(items.map((i) => [i.kind, i.payload, i.priority, i.maxAttempts])).toEqual([
          ["a", 0, 5, 3],
          ["b", 1, 0, null],
          ["a", 2, -1, null],
          ["c", 3, 0, 1]
        ])
        expectAround(items[0].runAt, before + 2_000, after + 2_000, 50)
        expect(items[1].runAt).toBe(at)
        expectAround(items[2].runAt, before, after, 50)
        expectAround(items[3].runAt, before, after, 50)
        // A batch sharing every value but the payload.
        const shared = yield* repo.enqueueMany([0, 1, 2].map((n) => ({ kind: "d", payload: n, runAt: at, priority: 9 })))
        for (const [n, r] of shared.entries()) {
          const item = yield* getItem(r.id)
          expect([item.kind, item.payload, item.runAt, item.priority, item.maxAttempts]).toEqual(["d", n, at, 9, null])
        }
        // A batch sharing one given budget.
        const budgeted = yield* repo.enqueueMany([0, 1].map((n) => ({ kind: "e", payload: n, maxAttempts: 4 })))
        for (const r of budgeted) expect((yield* getItem(r.id)).maxAttempts).toBe(4)
      })))

    it.live("an empty batch is [] and writes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.enqueueMany([])).toEqual([])
        expect(yield* countAll).toBe(0)
      })))

    it.live("the default attempts come from the claiming service's options, not written at enqueue", () =>
      run(
        Effect.gen(function*() {
          const repo = yield* Repo
          const added = yield* repo.enqueue("a", 1)
          expect((yield* getItem(added.id)).maxAttempts).toBeNull()
          const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
          expect(claim.maxAttempts).toBe(2)
        }),
        { defaultMaxAttempts: 2 }
      ))

    it.live("a large batch keeps input order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const requests = Array.from({ length: 500 }, (_, i) => ({
          kind: "bulk",
          payload: i,
          key: i % 7 === 0 ? `k${i % 21}` : undefined
        }))
        const results = yield* repo.enqueueMany(requests)
        expect(results).toHaveLength(500)
        const firstOfKey = new Map<string, number>()
        for (const [i, r] of results.entries()) {
          const key = requests[i].key
          if (key !== undefined && firstOfKey.has(key)) {
            expect(r).toEqual({ _tag: "Deduplicated", id: firstOfKey.get(key) })
          } else {
            expect(r._tag).toBe("Enqueued")
            if (key !== undefined) firstOfKey.set(key, r.id)
            expect((yield* getItem(r.id)).payload).toBe(i)
          }
        }
        expect(yield* countAll).toBe(500 - results.filter((r) => r._tag === "Deduplicated").length)
      })))
  })
}

const statsGetNextDue = (backend: Backend) => {
  const { run, lease, deadItem } = storeContext(backend)
  describe("stats, get, nextDueIn", () => {
    it.live("stats count due, scheduled, running, done, dead and cancelled, by kind; an expired lease is due", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.stats).toEqual({ due: 0, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 0, byKind: {} })
        yield* deadItem("b")
        yield* repo.enqueue("b", "done")
        const [finished] = yield* repo.claim({ worker: "w", limit: 1, lease, kinds: ["b"] })
        expect(yield* repo.complete(finished)).toBe(true)
        yield* repo.enqueue("a", "running")
        yield* repo.enqueue("a", "expired")
        const claims = yield* repo.claim({ worker: "w", limit: 2, lease, kinds: ["a"] })
        expect(claims).toHaveLength(2)
        yield* expireLease(claims.find((c) => c.payloadJson === "\"expired\"")!.id)
        yield* repo.enqueue("a", "due")
        yield* repo.enqueue("a", "scheduled", { delay: "1 hour" })
        yield* repo.enqueue("b", "due")
        expect(yield* repo.stats).toEqual({
          due: 3,
          scheduled: 1,
          running: 1,
          done: 1,
          dead: 1,
          cancelled: 0,
          byKind: {
            a: { due: 2, scheduled: 1, running: 1, done: 0, dead: 0, cancelled: 0 },
            b: { due: 1, scheduled: 0, running: 0, done: 1, dead: 1, cancelled: 0 }
          }
        })
      })))

    it.live("getMany: the items among the ids, in id order, in one read; unknown and invalid ids left out", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const a = (yield* repo.enqueue("a", { n: 1 })).id
        const b = (yield* repo.enqueue("b", { n: 2 }, { key: "k" })).id
        expect(yield* repo.getMany([])).toEqual([])
        const got = yield* repo.getMany([b, 999_999, a, b, 0, -1, 1.5])
        expect(got.map((i) => [i.id, i.kind, i.payload, i.key])).toEqual([[a, "a", { n: 1 }, null], [b, "b", { n: 2 }, "k"]])
        // The same items as get reads them.
        expect(got).toEqual([Option.getOrThrow(yield* repo.get(a)), Option.getOrThrow(yield* repo.get(b))])
      })))

    it.live("get of a missing id is None; get returns the item as stored", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.get(1)).toEqual(Option.none())
        expect(yield* repo.get(999_999)).toEqual(Option.none())
        // Ids that cannot name an item are None too, on every backend (not a StorageError).
        for (const id of [0, -1, 1.5, NaN, Infinity, 2 ** 63]) {
          expect(yield* repo.get(id)).toEqual(Option.none())
        }
        const before = yield* dbNow
        const added = yield* repo.enqueue("email.send", { to: "x" }, { key: "m1", priority: 2, maxAttempts: 4 })
        const after = yield* dbNow
        const item = yield* getItem(added.id)
        expect(item).toMatchObject({
          id: added.id,
          kind: "email.send",
          payload: { to: "x" },
          key: "m1",
          priority: 2,
          state: "waiting",
          attempts: 0,
          maxAttempts: 4,
          lastError: null,
          claimedBy: null,
          leaseUntil: null
        })
        expectAround(item.createdAt, before, after, 50)
        expectAround(item.updatedAt, before, after, 50)
        expectAround(item.runAt, before, after, 50)
      })))

    it.live("nextDueIn: None on an empty queue, about the delay for a scheduled item, items already due not reported", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.nextDueIn).toEqual(Option.none())
        // An item due at once is the claim's, not the wait's.
        const immediate = yield* repo.enqueue("job", { now: true })
        expect(yield* repo.nextDueIn).toEqual(Option.none())
        const added = yield* repo.enqueue("job", {}, { delay: "1 minute" })
        const wait = yield* repo.nextDueIn
        expect(Option.isSome(wait)).toBe(true)
        expectAround(Duration.toMillis(Option.getOrThrow(wait)), 55_000, 60_000, 0)
        // A scheduled item that has come due is not reported either: the next is.
        yield* repo.enqueue("job", {}, { delay: "5 minutes" })
        yield* makeDue(added.id)
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 295_000, 300_000, 0)
        // So is one whose backoff has passed (scheduled after its creation, due now).
        yield* setRow(added.id, { created_at: 1, run_at: 2 })
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 295_000, 300_000, 0)
        // A running item's lease end counts too.
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "20 seconds" })
        expect(claim.id).toBe(added.id)
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 15_000, 20_000, 0)
        // Dead items are not waited for.
        expect(yield* repo.fail(claim, "x", { _tag: "Dead" })).toBe("dead")
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 290_000, 300_000, 0)
        // The item due at once was waiting all along.
        expect(Option.map(yield* repo.get(immediate.id), (i) => i.state)).toEqual(Option.some("waiting"))
      })))

    it.live("nextDueIn is None when only dead items remain", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* deadItem("job")
        expect(yield* repo.nextDueIn).toEqual(Option.none())
      })))
  })
}

const hostileValues = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  describe("hostile values are stored exactly", () => {
    const hostile = {
      quotes: `it's "quoted" \`back\``,
      sql: "'; DROP TABLE docket_items; --",
      emoji: "📬 ✉️ 👩‍👩‍👧",
      nul: "before\u0000after",
      lone: "x\ud800y\udfffz",
      backslash: "C:\\path\\n\\u0000",
      nested: { "key with 'quote'": ["\"", "'", "\\", "\n\t"] },
      numbers: [0, -1, 1.5, 1e300, Number.MAX_SAFE_INTEGER]
    }

    it.live("payloads and keys round-trip through get and claim", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const keys = ["k'\"; DROP TABLE docket_items; --", "🔑 ключ", "back\\slash", "percent %s $1 ?1 :name"]
        const added = yield* Effect.forEach(keys, (key) => repo.enqueue("job", { ...hostile, key }, { key }))
        expect(added.map((a) => a._tag)).toEqual(["Enqueued", "Enqueued", "Enqueued", "Enqueued"])
        // Dedupe finds each hostile key.
        for (const [i, key] of keys.entries()) {
          expect(yield* repo.enqueue("job", 0, { key })).toEqual({ _tag: "Deduplicated", id: added[i].id })
        }
        const [many] = yield* repo.enqueueMany([{ kind: "job", payload: hostile, key: keys[0] }])
        expect(many).toEqual({ _tag: "Deduplicated", id: added[0].id })
        for (const [i, key] of keys.entries()) {
          const item = yield* getItem(added[i].id)
          expect(item.key).toBe(key)
          expect(item.payload).toEqual({ ...hostile, key })
        }
        const plain = yield* repo.enqueue("job", hostile.lone)
        expect((yield* getItem(plain.id)).payload).toBe(hostile.lone)
        const claims = yield* repo.claim({ worker: "w'\"; --", limit: 10, lease })
        expect(claims).toHaveLength(5)
        for (const claim of claims) {
          const i = added.findIndex((a) => a.id === claim.id)
          if (i === -1) {
            expect(JSON.parse(claim.payloadJson)).toBe(hostile.lone)
          } else {
            expect(claim.key).toBe(keys[i])
            expect(JSON.parse(claim.payloadJson)).toEqual({ ...hostile, key: keys[i] })
          }
          expect(claim.worker).toBe("w'\"; --")
        }
        expect(yield* countAll).toBe(5)
      })))

    it.live("a batch stores each payload's JSON text exactly, with and without keys", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const payloads: ReadonlyArray<unknown> = [
          hostile,
          ...Object.values(hostile),
          null,
          "\ud800",
          "]}, [\"",
          { "": [[], {}, [null]] },
          -0.5
        ]
        const plain = yield* repo.enqueueMany(payloads.map((payload) => ({ kind: "job", payload })))
        const keyed = yield* repo.enqueueMany(payloads.map((payload, i) => ({ kind: "keyed", payload, key: `k${i}` })))
        const ids = [...plain, ...keyed].map((r) => {
          expect(r._tag).toBe("Enqueued")
          return r.id
        })
        const claims = yield* repo.claim({ worker: "w", limit: 100, lease })
        expect(claims).toHaveLength(ids.length)
        const byId = new Map(claims.map((c) => [c.id, c.payloadJson]))
        const expected = [...payloads, ...payloads].map((p) => JSON.stringify(p))
        expect(ids.map((id) => byId.get(id))).toEqual(expected)
      })))

    it.live("error texts are kept (NUL escaped, lone surrogates replaced), quotes and all", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        const error = `it's "bad"; DROP TABLE docket_items; -- 📬 \u0000 \ud800`
        expect(yield* repo.fail(claim, error, { _tag: "Retry", delay: 0 })).toBe("retried")
        const item = yield* getItem(claim.id)
        expect(item.lastError).toBe(`it's "bad"; DROP TABLE docket_items; -- 📬 \\u0000 \ufffd`)
        const [again] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(again.lastError).toBe(item.lastError)
        // A very long error is kept bounded.
        expect(yield* repo.fail(again, "e".repeat(100_000), { _tag: "Dead" })).toBe("dead")
        const dead = yield* getItem(again.id)
        expect(dead.lastError!.startsWith("e".repeat(16_384))).toBe(true)
        expect(dead.lastError!.length).toBeLessThan(16_500)
      })))
  })
}

const transactions = (backend: Backend) => {
  const { run } = storeContext(backend)
  describe("transactions", () => {
    it.live("an enqueue inside a transaction that fails is rolled back; one that succeeds commits", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const sql = yield* SqlClient.SqlClient
        const failed = yield* sql.withTransaction(
          Effect.gen(function*() {
            yield* repo.enqueue("job", 1, { key: "k" })
            yield* repo.enqueueMany([{ kind: "job", payload: 2 }, { kind: "job", payload: 3, key: "k" }])
            expect(yield* countAll).toBe(2)
            return yield* Effect.fail("boom" as const)
          })
        ).pipe(Effect.flip)
        expect(failed).toBe("boom")
        expect(yield* countAll).toBe(0)
        // The rolled-back key is not held.
        const ok = yield* sql.withTransaction(
          Effect.zip(repo.enqueue("job", 4, { key: "k" }), repo.enqueue("job", 5))
        )
        expect(ok[0]._tag).toBe("Enqueued")
        expect(yield* countAll).toBe(2)
        expect((yield* getItem(ok[0].id)).payload).toBe(4)
      })))

    it.live("a defect inside the transaction rolls back the enqueue too", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const sql = yield* SqlClient.SqlClient
        const exit = yield* sql.withTransaction(
          Effect.zipRight(repo.enqueue("job", 1), Effect.die(new Error("crash")))
        ).pipe(Effect.exit)
        expect(exit._tag).toBe("Failure")
        expect(yield* countAll).toBe(0)
      })))
  })
}

/** Registers the items tests for a backend. */
export const itemsSuite = (backend: Backend) => {
  dedupe(backend)
  enqueueMany(backend)
  statsGetNextDue(backend)
  hostileValues(backend)
  transactions(backend)
}
