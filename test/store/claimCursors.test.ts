/**
 * The claim cursors' bookkeeping (src/internal/sql/claimCursors.ts), on a
 * clock of the test's own: when claims go on from cursors, how the cursors
 * move, when the next full walk is due. What the claims then read from the
 * database is tested in test/store/pg/heldHorizon.ts.
 */
import { describe, expect, it } from "vitest"
import { Cursors, FULL_EVERY_MAX_MS, FULL_EVERY_MIN_MS, WASTED_ENTRIES, type WalkedRow } from "../../src/internal/sql/claimCursors.js"

const item = (id: number, priority: number, runAt: number, walked = true): WalkedRow => ({
  id, priority, run_at: runAt, walked, expired_until: null, entries_read: null
})
const end = (entriesRead: number, expiredUntil: number | null): WalkedRow => ({
  id: null, priority: null, run_at: null, walked: null, expired_until: expiredUntil, entries_read: entriesRead
})

const setUp = () => {
  let now = 0
  const cursors = new Cursors(() => now)
  const claim = (rows: ReadonlyArray<WalkedRow>, took = 1, kinds: ReadonlyArray<string> | null = null) => {
    const walk = cursors.plan(kinds)
    const startedAt = now
    now += took
    cursors.record(kinds, walk, startedAt, rows)
    return walk
  }
  return { cursors, claim, advance: (ms: number) => (now += ms) }
}

describe("claim cursors", () => {
  it("every claim is a full walk while full walks read little beyond their items", () => {
    const { claim, cursors } = setUp()
    for (let i = 0; i < 5; i++) expect(claim([item(i, 0, 100 + i), end(WASTED_ENTRIES, 1)]).priorities).toBeNull()
    expect(cursors.onCursors()).toBe(false)
  })

  it("a full walk that reads many entries beyond its items puts the claims on cursors, at the last item claimed of each priority", () => {
    const { claim, cursors } = setUp()
    claim([item(7, 5, 300), item(3, 0, 100), item(4, 0, 100), item(9, 0, 90, false), end(WASTED_ENTRIES + 100, 1_000)])
    expect(cursors.onCursors()).toBe(true)
    // The limited kind's item (walked false) does not move a cursor.
    expect(claim([end(10, 1_001)])).toEqual({ priorities: [5, 0], runAts: [300, 100], ids: [7, 4], expiredAfter: 1_000 })
  })

  it("a cursor walk only moves a cursor on; the next full walk is due a second later, or 20 times its duration (at most 10 s), and re-anchors", () => {
    const { advance, claim } = setUp()
    claim([item(10, 0, 100), end(WASTED_ENTRIES + 100, 5)], 1)
    claim([item(20, 0, 200), end(50, 6)])
    claim([item(15, 0, 150), end(50, 7)]) // behind the cursor: it stays at 20
    expect(claim([end(5, 8)])).toMatchObject({ priorities: [0], ids: [20], expiredAfter: 7 })
    advance(FULL_EVERY_MIN_MS)
    // The full walk found an item that had landed behind: the cursor goes back to it.
    expect(claim([item(12, 0, 120), end(WASTED_ENTRIES + 100, 9)], 100).priorities).toBeNull()
    expect(claim([end(5, 10)])).toMatchObject({ priorities: [0], ids: [12] })
    // That full walk took 100 ms: the next is due 2 s after it.
    advance(1_500)
    expect(claim([end(5, 11)]).priorities).not.toBeNull()
    advance(500)
    expect(claim([end(WASTED_ENTRIES + 100, 12)], 2_000).priorities).toBeNull()
    advance(FULL_EVERY_MAX_MS - 10)
    expect(claim([end(5, 13)]).priorities).not.toBeNull()
    advance(10)
    // A full walk that reads little again ends the cursor claims.
    expect(claim([end(3, 14)]).priorities).toBeNull()
    expect(claim([end(3, 15)]).priorities).toBeNull()
  })

  it("a full walk that ended leases filled keeps the bound the cursors had", () => {
    const { claim } = setUp()
    claim([item(1, 0, 1), end(WASTED_ENTRIES + 100, 500)])
    claim([end(5, null)])
    expect(claim([end(5, 600)])).toMatchObject({ expiredAfter: 500 })
  })

  it("each set of kinds has cursors of its own", () => {
    const { claim } = setUp()
    claim([item(1, 0, 1), end(WASTED_ENTRIES + 100, 5)], 1, ["a"])
    expect(claim([end(5, 6)], 1, ["a", "b"]).priorities).toBeNull()
    expect(claim([end(5, 6)], 1, ["a"]).priorities).toEqual([0])
  })
})
