/**
 * The shared store suite: dead items (list, retry, delete).
 * Run on every backend by test/store/sqlite.test.ts and test/store/pg.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, countState } from "../support/db.js"
import { dbNow } from "../support/harness.js"
import { expectInvalid, getItem, storeContext } from "../support/store.js"

const Repo = QueueRepo.QueueRepo

const deadItems = (backend: Backend) => {
  const { run, lease, deadItem } = storeContext(backend)
  describe("dead items", () => {
    it.live("listDead: by kind, paged with after and limit, with the last error", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.listDead()).toEqual([])
        const d1 = yield* deadItem("a", undefined, "e1")
        const d2 = yield* deadItem("a", undefined, "e2")
        const d3 = yield* deadItem("b", undefined, "e3")
        yield* repo.enqueue("a", "alive")
        const d4 = yield* deadItem("a", undefined, "e4")
        const d5 = yield* deadItem("b", undefined, "e5")
        const all = yield* repo.listDead()
        expect(all.map((i) => i.id)).toEqual([d1, d2, d3, d4, d5])
        expect(all.map((i) => i.lastError)).toEqual(["e1", "e2", "e3", "e4", "e5"])
        expect(all.every((i) => i.state === "dead")).toBe(true)
        expect((yield* repo.listDead({ kind: "a" })).map((i) => i.id)).toEqual([d1, d2, d4])
        expect((yield* repo.listDead({ kind: "zzz" })).map((i) => i.id)).toEqual([])
        const page1 = yield* repo.listDead({ limit: 2 })
        expect(page1.map((i) => i.id)).toEqual([d1, d2])
        const page2 = yield* repo.listDead({ limit: 2, after: page1[1].id })
        expect(page2.map((i) => i.id)).toEqual([d3, d4])
        const page3 = yield* repo.listDead({ limit: 2, after: page2[1].id })
        expect(page3.map((i) => i.id)).toEqual([d5])
        expect(yield* repo.listDead({ limit: 2, after: d5 })).toEqual([])
        expect((yield* repo.listDead({ kind: "b", after: d3 })).map((i) => i.id)).toEqual([d5])
        yield* expectInvalid(repo.listDead({ limit: 0 }), "page")
        yield* expectInvalid(repo.listDead({ after: -1 }), "page")
        yield* expectInvalid(repo.listDead({ kind: "bad kind" }), "kind")
      })))

    it.live("retryDead by ids, all, and all of a kind: waiting again with a fresh attempt budget", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const d1 = yield* deadItem("a")
        const d2 = yield* deadItem("a")
        const d3 = yield* deadItem("b")
        const d4 = yield* deadItem("b")
        const d5 = yield* deadItem("c")
        expect(yield* repo.retryDead({ ids: [d2, 123_456] })).toEqual([d2])
        const retried = yield* getItem(d2)
        expect(retried).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null, leaseUntil: null })
        expect(retried.runAt).toBeLessThanOrEqual(yield* dbNow)
        // A waiting id is not dead: not retried again.
        expect(yield* repo.retryDead({ ids: [d2] })).toEqual([])
        expect(yield* repo.retryDead({ all: true, kind: "b" })).toEqual([d3, d4])
        expect((yield* repo.listDead()).map((i) => i.id)).toEqual([d1, d5])
        expect(yield* repo.retryDead({ all: true })).toEqual([d1, d5])
        expect(yield* repo.listDead()).toEqual([])
        expect(yield* countState("waiting")).toBe(5)
        // A retried item is claimable and runs with attempt 1.
        const claims = yield* repo.claim({ worker: "w", limit: 10, lease })
        expect(claims.map((c) => c.attempt)).toEqual([1, 1, 1, 1, 1])
        yield* expectInvalid(repo.retryDead({ ids: [] }), "ids")
        yield* expectInvalid(repo.retryDead({ ids: [1.5] }), "ids")
      })))

    it.live("retryDead leaves dead an item whose key a waiting item holds, and retries one of dead twins", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const held = yield* deadItem("mirror.refresh", "k")
        const waiting = yield* repo.enqueue("mirror.refresh", "new", { key: "k" })
        expect(waiting._tag).toBe("Enqueued")
        expect(yield* repo.retryDead({ ids: [held] })).toEqual([])
        expect(yield* repo.retryDead({ all: true })).toEqual([])
        expect((yield* getItem(held)).state).toBe("dead")
        // Twins: two dead items with one key; only the first is retried.
        const t1 = yield* deadItem("mirror.refresh", "twin")
        const t2 = yield* deadItem("mirror.refresh", "twin")
        expect(yield* repo.retryDead({ ids: [t2, t1] })).toEqual([t1])
        expect((yield* getItem(t2)).state).toBe("dead")
        expect(yield* countState("waiting")).toBe(2)
      })))

    it.live("deleteDead by ids, all of a kind, all; it never touches live items", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const d1 = yield* deadItem("a")
        const d2 = yield* deadItem("a")
        const d3 = yield* deadItem("b")
        const alive = yield* repo.enqueue("a", "alive")
        expect(yield* repo.deleteDead({ ids: [d1, alive.id] })).toEqual([d1])
        expect(yield* repo.get(d1)).toEqual(Option.none())
        expect((yield* getItem(alive.id)).state).toBe("waiting")
        expect(yield* repo.deleteDead({ all: true, kind: "b" })).toEqual([d3])
        expect(yield* repo.deleteDead({ all: true })).toEqual([d2])
        expect(yield* repo.deleteDead({ all: true })).toEqual([])
        expect(yield* countAll).toBe(1)
        yield* expectInvalid(repo.deleteDead({ ids: [] }), "ids")
        yield* expectInvalid(repo.deleteDead({ all: true, kind: "" }), "kind")
      })))
  })
}

/** Registers the dead tests for a backend. */
export const deadSuite = (backend: Backend) => {
  deadItems(backend)
}
