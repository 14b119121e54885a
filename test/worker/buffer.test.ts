/**
 * The prefetch buffer (src/internal/buffer.ts): claimed items waiting for a
 * slot, in claim order; items a kind limit holds back keep their place. And
 * which of them the pool's state gives back after the hold (state.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import type { Claim } from "../../src/Domain.js"
import { ClaimBuffer } from "../../src/internal/buffer.js"
import { PoolState } from "../../src/internal/worker/state.js"
import { runOf } from "../support/worker.js"

const claim = (id: number, kind = "a"): Claim => ({ id, kind }) as unknown as Claim
const ids = (claims: ReadonlyArray<Claim>) => claims.map((c) => c.id)

describe("the claim buffer", () => {
  it("hands items out in claim order, with when each claim was sent and came back", () => {
    const buffer = new ClaimBuffer()
    buffer.push(claim(1), 10, 15)
    buffer.push(claim(2), 20)
    expect(buffer.size).toBe(2)
    expect(buffer.oldest()).toBe(15)
    expect(buffer.takeOne(undefined)).toEqual({ claim: claim(1), at: 10, since: 15 })
    expect(buffer.takeOne(undefined)).toEqual({ claim: claim(2), at: 20, since: 20 })
    expect(buffer.oldest()).toBeUndefined()
    expect(buffer.takeOne(undefined)).toBeUndefined()
    expect(buffer.size).toBe(0)
  })

  it("an item its kind's limit holds back keeps its place; the next admitted one is taken", () => {
    const buffer = new ClaimBuffer()
    for (const [id, kind] of [[1, "limited"], [2, "free"], [3, "limited"], [4, "free"]] as const) buffer.push(claim(id, kind), id)
    const admitFree = (c: Claim) => c.kind === "free"
    expect(buffer.some(admitFree)).toBe(true)
    expect(buffer.takeOne(admitFree)?.claim.id).toBe(2)
    expect(buffer.takeOne(admitFree)?.claim.id).toBe(4)
    expect(buffer.takeOne(admitFree)).toBeUndefined()
    expect(buffer.some(admitFree)).toBe(false)
    expect(buffer.some(undefined)).toBe(true)
    // The held-back items, still in order.
    expect(ids(buffer.takeAll())).toEqual([1, 3])
    expect(buffer.some(undefined)).toBe(false)
  })

  it("takes the items claimed before a cutoff (the oldest, at the front), and no later one", () => {
    const buffer = new ClaimBuffer()
    for (const id of [1, 2, 3, 4]) buffer.push(claim(id), id * 100)
    expect(buffer.takeOne(undefined)?.claim.id).toBe(1)
    expect(ids(buffer.takeOlderThan(300))).toEqual([2])
    expect(ids(buffer.takeOlderThan(300))).toEqual([])
    expect(buffer.size).toBe(2)
    expect(ids(buffer.takeOlderThan(1000))).toEqual([3, 4])
    expect(buffer.size).toBe(0)
  })

  it("the cutoff is on when a claim came back; the first items free slots take (as many, of the kinds admitted) are kept", () => {
    const buffer = new ClaimBuffer()
    // Sent long ago, back only now: not old.
    buffer.push(claim(1), 0, 500)
    expect(ids(buffer.takeOlderThan(400))).toEqual([])
    for (const [id, kind] of [[2, "limited"], [3, "free"], [4, "free"], [5, "free"]] as const) buffer.push(claim(id, kind), 0, 600 + id)
    // Two free slots, "limited" at its limit: 1 and 3 stay for them, 2, 4 and 5 go.
    expect(ids(buffer.takeOlderThan(1000, 2, (c) => c.kind !== "limited"))).toEqual([2, 4, 5])
    expect(ids(buffer.takeAll())).toEqual([1, 3])
  })

  it("finds and takes the claims of given items (cancelled ones), leaving the others in order", () => {
    const buffer = new ClaimBuffer()
    for (const id of [1, 2, 3, 4, 5]) buffer.push(claim(id), id)
    expect(buffer.heldAmong(new Set([2, 4, 9]))).toEqual([2, 4])
    expect(ids(buffer.takeItems(new Set([2, 4, 9])))).toEqual([2, 4])
    expect(buffer.heldAmong(new Set([2, 4]))).toEqual([])
    expect(buffer.size).toBe(3)
    expect(ids(buffer.takeAll())).toEqual([1, 3, 5])
  })

  it("stays in order across many takes and pushes (its head moves; the array is compacted past 1024 taken)", () => {
    const buffer = new ClaimBuffer()
    let next = 0
    let expected = 0
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 100; i++) buffer.push(claim(next++), 0)
      for (let i = 0; i < 90; i++) expect(buffer.takeOne(undefined)?.claim.id).toBe(expected++)
    }
    expect(buffer.size).toBe(500)
    const rest = ids(buffer.takeAll())
    expect(rest).toEqual(Array.from({ length: 500 }, (_, i) => expected + i))
    expect(buffer.size).toBe(0)
    buffer.push(claim(7), 0)
    expect(buffer.takeOne(undefined)?.claim.id).toBe(7)
  })
})

describe("the pool state's give-back", () => {
  it("keeps the old items free slots take next, no more of a kind than its limit here leaves room for", () => {
    const state = new PoolState(new Map([["limited", 1]]))
    for (const [id, kind] of [[1, "limited"], [2, "limited"], [3, "free"], [4, "free"]] as const) state.buffer.push(claim(id, kind), 0)
    // Four slots, one busy: three free. One "limited" may start, then two "free".
    state.begin(claim(9, "free"), runOf(claim(9, "free"), 0).slot, 0)
    expect(ids(state.takeHeldTooLong(1, 4))).toEqual([2])
    expect(ids(state.buffer.takeAll())).toEqual([1, 3, 4])
    // No slot free: every old item goes back.
    state.buffer.push(claim(5), 0)
    expect(ids(state.takeHeldTooLong(1, 1))).toEqual([5])
  })
})
