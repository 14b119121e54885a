/**
 * Groups of a kind (issue 36: an item's `group`, a kind's `perGroup` limits),
 * run against every backend from the shared store suite (./suite.ts): a
 * group's exclusion, its order, the strict wait through a retry's backoff,
 * N at once, the round-robin across groups, bad input; a person pausing one
 * group (./groupControls.ts: the controls of issue 36's claim side). Time is
 * moved by editing rows (a lease ended, a retry made due), never by sleeping.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { InvalidInput } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, expireLease, makeDue, unsafe } from "../support/db.js"
import { withRepo } from "../support/harness.js"
import { groupControlsSuite } from "./groupControls.js"

const Repo = QueueRepo.QueueRepo
const lease = "1 minute"

const claim = (limit = 100) => Effect.flatMap(Repo, (repo) => repo.claim({ worker: "w", limit, lease, kinds: ["g"] }))

// Items of kind "g", each with its payload naming it: [group, n] pairs.
const enqueue = (items: ReadonlyArray<readonly [string | null, number]>, extra: Partial<QueueRepo.EnqueueOptions> = {}) =>
  Effect.flatMap(Repo, (repo) =>
    repo.enqueueMany(items.map(([group, n]) => ({
      kind: "g",
      payload: { group, n },
      ...(group === null ? {} : { group }),
      ...extra
    }))))

const names = (claims: ReadonlyArray<QueueRepo.Claim>) =>
  claims.map((c) => {
    const p = JSON.parse(c.payloadJson) as { group: string | null; n: number }
    return `${p.group ?? "-"}${p.n}`
  }).sort()

const completeAll = (claims: ReadonlyArray<QueueRepo.Claim>) =>
  Effect.flatMap(Repo, (repo) => repo.completeMany(claims))

const perGroup = (concurrency: number, ordered = false) =>
  Effect.flatMap(Repo, (repo) => repo.declarePerGroup("g", { concurrency, ordered }))

export const groupsSuite = (backend: Backend) =>
  describe("groups of a kind", () => {
    // A pass looks at 1,000 groups, or at as many as the claim takes when it
    // takes more (migrations/pg/0021_grouped_claim_set.sql): before, a pool's
    // claim of 1,500 sequences with 10 free slots (10, then 1,490 prefetched)
    // over 1,500 free groups took 1,010.
    it.live("a claim of more than 1,000 sequences takes one head from as many groups", () =>
      withRepo(backend, Effect.gen(function*() {
        yield* perGroup(1, true)
        const items = Array.from({ length: 1_600 }, (_, i) => [`g${i % 1_500}`, i] as const)
        yield* enqueue(items)
        const claimed = yield* Effect.flatMap(Repo, (repo) =>
          repo.claim({ worker: "w", limit: 1_500, limitedMax: 10, lease, kinds: ["g"] }))
        expect(claimed).toHaveLength(1_500)
        // Each group's head (its first item), each group once.
        expect(new Set(claimed.map((c) => c.group)).size).toBe(1_500)
        expect(Math.max(...claimed.map((c) => (JSON.parse(c.payloadJson) as { n: number }).n))).toBe(1_499)
      })))

    // migrations/pg/0022_grouped_claim_chunks.sql: a sequence's walk finds the
    // next groups in reads of up to 64 entries of the group index, each
    // group's first entry its head. A group longer than a read, a read that
    // ends inside a group, a head running with a live lease (passed over) or
    // with its lease ended (taken again) must each give the group's head, once.
    it.live("sequences: each group's head in round-robin, whatever the groups' lengths; a running head passed over, an ended one taken again", () =>
      withRepo(backend, Effect.gen(function*() {
        yield* perGroup(1, true)
        // Group "b" holds 150 items (longer than a read), the 24 others 10
        // each (a read of 64 ends inside one), enqueued interleaved.
        const groups = ["a", "b", ..."cdefghijklmnopqrstuvwxy"]
        const items: Array<readonly [string, number]> = []
        for (let k = 0; k < 150; k++) for (const g of groups) if (g === "b" || k < 10) items.push([g, k])
        yield* enqueue(items)
        const first = yield* claim(100)
        expect(names(first)).toEqual(groups.map((g) => `${g}0`).sort())
        // Every group's head runs: nothing more to take.
        expect(yield* claim(100)).toEqual([])
        // "c"'s head stays running, "d"'s lease ends, the rest complete.
        const byGroup = new Map(first.map((c) => [c.group, c]))
        yield* expireLease(byGroup.get("d")!.id)
        yield* completeAll(first.filter((c) => c.group !== "c" && c.group !== "d"))
        const second = yield* claim(100)
        expect(names(second)).toEqual(groups.filter((g) => g !== "c").map((g) => g === "d" ? "d0" : `${g}1`).sort())
        expect(second.find((c) => c.group === "d")?.id).toBe(byGroup.get("d")!.id)
        // A claim of 3 goes on round-robin after the last group it looked at.
        yield* completeAll(second)
        const third = yield* claim(3)
        const fourth = yield* claim(3)
        expect(names([...third, ...fourth])).toEqual(["a2", "b2", "d1", "e2", "f2", "g2"])
      })))

    it.live("a group is stored and read back; without perGroup it is a label only", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        const [a, b] = yield* enqueue([["a", 1], ["a", 2]])
        const [plain] = yield* enqueue([[null, 3]])
        expect(Option.getOrThrow(yield* repo.get(a.id)).group).toBe("a")
        expect(Option.getOrThrow(yield* repo.get(plain.id)).group).toBeNull()
        const single = yield* repo.enqueue("g", { one: true }, { group: "solo" })
        expect(Option.getOrThrow(yield* repo.get(single.id)).group).toBe("solo")
        const claimed = yield* claim()
        expect(claimed.map((c) => c.id).sort((x, y) => x - y)).toEqual([a.id, b.id, plain.id, single.id])
        expect(claimed.find((c) => c.id === a.id)?.group).toBe("a")
        yield* completeAll(claimed)
        // A done item keeps its group (PostgreSQL moves it to docket_done).
        expect(Option.getOrThrow(yield* repo.get(a.id)).group).toBe("a")
      })))

    // migrations/pg/0020_grouped_claim.sql: grouped items are claimed only by
    // the grouped claim (round-robin), first within the controlled kinds'
    // share (the pool's free slots), then with what the general claim left of
    // the batch; ungrouped items of the same kind come through the general claim.
    it.live("without perGroup, grouped items come round-robin, in the free slots' share and then in what ungrouped ones leave", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        yield* enqueue([["a", 1], ["a", 2], ["a", 3], ["a", 4], ["b", 1], ["b", 2], [null, 1], [null, 2]])
        const first = yield* repo.claim({ worker: "w", limit: 5, limitedMax: 2, lease, kinds: ["g"] })
        expect(first).toHaveLength(5)
        expect(names(first.filter((c) => c.group === null))).toEqual(["-1", "-2"])
        const grouped = first.filter((c) => c.group !== null)
        expect(grouped).toHaveLength(3)
        expect(new Set(grouped.map((c) => c.group))).toEqual(new Set(["a", "b"]))
        // No free slot: grouped items are still prefetched, as ungrouped ones are.
        const rest = yield* repo.claim({ worker: "w", limit: 100, limitedMax: 0, lease, kinds: ["g"] })
        expect(names([...first, ...rest])).toEqual(["-1", "-2", "a1", "a2", "a3", "a4", "b1", "b2"])
        // Every kind at once (no kinds given) claims them the same way.
        yield* completeAll([...first, ...rest])
        yield* enqueue([["c", 1], ["c", 2], [null, 3]])
        expect(names(yield* repo.claim({ worker: "w", limit: 100, limitedMax: 1, lease }))).toEqual(["-3", "c1", "c2"])
      })))

    it.live("bad input: an empty, over-long or non-text group, a perGroup concurrency of 0: typed errors, nothing written", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        for (const group of ["", "x".repeat(513), 42 as unknown as string]) {
          const error = yield* Effect.flip(repo.enqueue("g", {}, { group }))
          expect(error).toBeInstanceOf(InvalidInput)
          expect((error as InvalidInput).field).toBe("group")
        }
        const bulk = yield* Effect.flip(repo.enqueueMany([{ kind: "g", payload: 1, group: "ok" }, { kind: "g", payload: 2, group: "" }]))
        expect((bulk as InvalidInput).field).toBe("group")
        expect((bulk as InvalidInput).reason).toMatch(/^item 1: /)
        expect(yield* countAll).toBe(0)
        for (const bad of [{ concurrency: 0 }, { concurrency: 1.5 }, { concurrency: 1, ordered: "yes" as unknown as boolean }]) {
          const error = yield* Effect.flip(repo.declarePerGroup("g", bad))
          expect((error as InvalidInput).field).toBe("perGroup")
        }
        const kinds = yield* unsafe<{ n: number | string }>("SELECT count(*) AS n FROM docket_kinds")
        expect(Number(kinds[0].n)).toBe(0)
        // The largest group is accepted.
        yield* repo.enqueue("g", {}, { group: "x".repeat(512) })
        expect(yield* countAll).toBe(1)
      })))

    it.live("concurrency 1: one item of a group runs at a time; other groups and ungrouped items go on", () =>
      withRepo(backend, Effect.gen(function*() {
        yield* perGroup(1)
        yield* enqueue([["a", 1], ["a", 2], ["b", 1], [null, 1], ["a", 3], ["b", 2], [null, 2]])
        const first = yield* claim()
        expect(names(first)).toEqual(["-1", "-2", "a1", "b1"])
        expect(yield* claim()).toEqual([])
        // A lease that ended holds nothing: the same item is claimed again, not the next.
        const a1 = first.find((c) => names([c])[0] === "a1")!
        yield* expireLease(a1.id)
        const again = yield* claim()
        expect(again.map((c) => c.id)).toEqual([a1.id])
        yield* completeAll([...again, ...first.filter((c) => c.id !== a1.id)])
        expect(names(yield* claim())).toEqual(["a2", "b2"])
      })))

    it.live("ordered: a group's items start in enqueue order whatever their priority; the next only once the previous is finished", () =>
      withRepo(backend, Effect.gen(function*() {
        yield* perGroup(1, true)
        yield* enqueue([["a", 1]])
        yield* enqueue([["a", 2]], { priority: 100 })
        yield* enqueue([["a", 3]], { priority: 50 })
        const order: Array<string> = []
        for (let i = 0; i < 3; i++) {
          const claimed = yield* claim()
          expect(claimed.length).toBe(1)
          expect(yield* claim()).toEqual([])
          order.push(...names(claimed))
          yield* completeAll(claimed)
        }
        expect(order).toEqual(["a1", "a2", "a3"])
        expect(yield* claim()).toEqual([])
      })))

    it.live("ordered (strict): the group waits through its failed item's retries and backoff; a dead item releases it", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        yield* perGroup(1, true)
        yield* enqueue([["a", 1], ["a", 2], ["b", 1]])
        const first = yield* claim()
        expect(names(first)).toEqual(["a1", "b1"])
        const a1 = first.find((c) => names([c])[0] === "a1")!
        expect(yield* repo.fail(a1, "boom", { _tag: "Retry", delay: "1 hour" })).toBe("retried")
        yield* completeAll(first.filter((c) => c.id !== a1.id))
        // a1 waits for its backoff: a2 must not start meanwhile.
        expect(yield* claim()).toEqual([])
        yield* makeDue(a1.id)
        const retry = yield* claim()
        expect(retry.map((c) => [c.id, c.attempt])).toEqual([[a1.id, 2]])
        expect(yield* repo.fail(retry[0], "boom again", { _tag: "Dead" })).toBe("dead")
        expect(names(yield* claim())).toEqual(["a2"])
      })))

    it.live("concurrency N: at most N of a group at once, unordered in claim order; ordered N stops at an item not due", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        yield* perGroup(2)
        yield* enqueue([["a", 1], ["a", 2], ["a", 3], ["a", 4], ["a", 5]])
        const two = yield* claim()
        expect(names(two)).toEqual(["a1", "a2"])
        expect(yield* claim()).toEqual([])
        yield* completeAll(two.slice(0, 1))
        expect(names(yield* claim())).toEqual(["a3"])

        yield* perGroup(2, true)
        yield* enqueue([["o", 1], ["o", 2], ["o", 3], ["o", 4]])
        const ordered = (yield* claim()).filter((c) => c.group === "o")
        expect(names(ordered)).toEqual(["o1", "o2"])
        const o1 = ordered.find((c) => names([c])[0] === "o1")!
        yield* repo.fail(o1, "later", { _tag: "Retry", delay: "1 hour" })
        yield* completeAll(ordered.filter((c) => c.id !== o1.id))
        // The first two unfinished are o1 (not due) and o3: o3 must wait behind o1.
        expect((yield* claim()).filter((c) => c.group === "o")).toEqual([])
        yield* makeDue(o1.id)
        expect(names((yield* claim()).filter((c) => c.group === "o"))).toEqual(["o1", "o3"])
      })))

    it.live("fair: a claim goes round the groups, one item each first, so a big group does not hold back small ones", () =>
      withRepo(backend, Effect.gen(function*() {
        yield* perGroup(5)
        // The big group is enqueued first and sorts first.
        yield* enqueue(Array.from({ length: 200 }, (_, n) => ["a-big", n] as const))
        yield* enqueue(Array.from({ length: 8 }, (_, g) => [`s${g}`, 0] as const))
        const first = yield* claim(9)
        expect(new Set(first.map((c) => c.group)).size).toBe(9)
        // A batch larger than the groups gives each up to its free places.
        yield* completeAll(first)
        const second = yield* claim(20)
        expect(second.filter((c) => c.group === "a-big").length).toBe(5)
        expect(second.length).toBe(5)
        // Round-robin across claims: with one item a claim, each group in turn.
        yield* completeAll(second)
        yield* perGroup(1)
        yield* enqueue(Array.from({ length: 3 }, (_, g) => [`t${g}`, 0] as const))
        const turns: Array<string | null> = []
        for (let i = 0; i < 4; i++) {
          const one = yield* claim(1)
          turns.push(one[0]?.group ?? null)
          yield* completeAll(one)
        }
        expect(new Set(turns).size).toBe(4)
      })))

    it.live("inside an ordered group: a snooze and a release keep the head's place; a cancel frees the group; a key dedupes as before", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        yield* perGroup(1, true)
        const [a1, a2, a3] = yield* enqueue([["a", 1], ["a", 2], ["a", 3]])
        // A snoozed head waits for its delay, and the group with it.
        const [first] = yield* claim()
        expect(first.id).toBe(a1.id)
        expect(yield* repo.snooze(first, "1 hour")).toBe("snoozed")
        expect(yield* claim()).toEqual([])
        yield* makeDue(a1.id)
        // A released head (a pool's shutdown) is claimed again first.
        const [again] = yield* claim()
        expect(again.id).toBe(a1.id)
        expect(yield* repo.release(again)).toBe("released")
        const [third] = yield* claim()
        expect(third.id).toBe(a1.id)
        // A cancel of the running head frees the group: a2 is next.
        expect(yield* repo.cancel([a1.id])).toEqual(["cancelledRunning"])
        const [next] = yield* claim()
        expect(next.id).toBe(a2.id)
        // A cancel of a waiting item behind it takes it out of the order.
        expect(yield* repo.cancel([a3.id])).toEqual(["cancelled"])
        yield* completeAll([next])
        expect(yield* claim()).toEqual([])
        // A key keeps its meaning: a second enqueue of a waiting key is deduplicated, group or not.
        const keyed = yield* repo.enqueue("g", { k: 1 }, { group: "b", key: "k" })
        expect(yield* repo.enqueue("g", { k: 2 }, { group: "b", key: "k" })).toEqual({ _tag: "Deduplicated", id: keyed.id })
      })))

    it.live("a handler that declares no perGroup clears the limits: the kind's groups are labels again", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        yield* perGroup(1)
        yield* enqueue([["a", 1], ["a", 2]])
        expect((yield* claim()).length).toBe(1)
        expect(yield* repo.declarePerGroup("g", undefined)).toBe(true)
        expect(yield* repo.declarePerGroup("g", undefined)).toBe(false)
        expect((yield* claim()).length).toBe(1)
      })))

    groupControlsSuite(backend)
  })
