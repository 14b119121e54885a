/**
 * The group scenarios' judge (groupRuns.ts) on runs written here: it must
 * find each breach the scenarios look for (an overlap, a first start out of
 * order, an item skipped, another item after a killed run, a rerun in a live
 * process, more than N of a group at once), and accept what the rules allow
 * (a killed run's item again once its lease ended, a lost lease its process
 * reported). The scenarios pass only if the judge finds nothing: this is
 * what shows they can fail.
 */
import { describe, expect, it } from "vitest"
import { type GroupRun, judgeOrdered, mostPerGroup, supersededInProcess } from "./groupRuns.js"

const run = (item: number, start: number, end: number | null, extra: Partial<GroupRun> = {}): GroupRun => ({
  item,
  kind: "grp.ordered",
  group: "g",
  seq: 0,
  producer: 0,
  attempt: 1,
  pid: 1,
  start,
  end,
  ...extra
})

const ids = new Map([["g", [1, 2, 3]]])
const none = () => undefined
const noneLost = (_: GroupRun) => false
const judge = (
  runs: Array<GroupRun>,
  endOf: (r: GroupRun) => number | undefined = none,
  killed = new Set<number>(),
  lost: (r: GroupRun) => boolean = noneLost,
  precedes?: (a: number, b: number) => boolean
) => judgeOrdered(runs, ids, endOf, killed, lost, precedes)

describe("the group scenarios' judge", () => {
  it("accepts runs one after another in id order", () => {
    const v = judge([run(1, 0, 10), run(2, 10, 20), run(3, 25, 30)])
    expect([v.disorder, v.overlaps]).toEqual([[], []])
  })

  it("finds an overlap, a first start out of id order, and a skipped item", () => {
    expect(judge([run(1, 0, 10), run(2, 5, 20), run(3, 25, 30)]).overlaps.length).toBe(1)
    expect(judge([run(2, 0, 10), run(1, 10, 20), run(3, 25, 30)]).disorder.length).toBeGreaterThan(0)
    expect(judge([run(1, 0, 10), run(3, 10, 20), run(2, 25, 30)]).disorder.length).toBeGreaterThan(0)
  })

  it("enqueue order as given: two enqueues in flight at once may start either way, not one returned before the other began", () => {
    const runs = [run(2, 0, 10), run(1, 10, 20), run(3, 25, 30)]
    expect(judge(runs).disorder.length).toBeGreaterThan(0)
    // 1 and 2 were in flight at once; 3 was enqueued after both returned.
    const inFlight = (a: number, b: number) => a < b && b === 3
    expect(judge(runs, none, new Set(), noneLost, inFlight).disorder).toEqual([])
    expect(judge([run(1, 0, 10), run(3, 10, 20), run(2, 25, 30)], none, new Set(), noneLost, inFlight).disorder.length).toBeGreaterThan(0)
    // Never back to an item once another started after it.
    expect(judge([run(1, 0, 10), run(2, 10, 20), run(1, 25, 30, { attempt: 2 }), run(3, 35, 40)], none, new Set([1])).disorder.length)
      .toBeGreaterThan(0)
  })

  it("after a killed run: the same item again once its lease ended, never the next item, never before the lease's end", () => {
    const killed = new Set([1])
    const leaseEnd = (r: GroupRun) => (r.pid === 1 && r.item === 2 ? 100 : undefined)
    const ok = judge([run(1, 0, 10), run(2, 10, null), run(2, 120, 130, { pid: 2, attempt: 2 }), run(3, 140, 150, { pid: 2 })], leaseEnd, killed)
    expect([ok.disorder, ok.overlaps, ok.rerunsAfterKill, ok.rerunsAfterLeaseEnd]).toEqual([[], [], 1, 1])
    const next = judge([run(1, 0, 10), run(2, 10, null), run(3, 120, 130, { pid: 2 }), run(2, 140, 150, { pid: 2 })], leaseEnd, killed)
    expect(next.disorder.length).toBeGreaterThan(0)
    const early = judge([run(1, 0, 10), run(2, 10, null), run(2, 50, 60, { pid: 2, attempt: 2 }), run(3, 70, 80, { pid: 2 })], leaseEnd, killed)
    expect(early.overlaps.length).toBe(1)
  })

  it("a rerun after a run that returned: allowed after its process was killed or reported the lease lost, else a breach", () => {
    const runs = [run(1, 0, 10), run(1, 20, 30, { pid: 2, attempt: 2 }), run(2, 40, 50), run(3, 60, 70)]
    expect(judge(runs).disorder.length).toBe(1)
    expect(judge(runs, none, new Set([1])).disorder).toEqual([])
    const lost = judge(runs, none, new Set(), (r) => r.pid === 1 && r.item === 1)
    expect([lost.disorder, lost.afterLostLease]).toEqual([[], 1])
  })

  it("a killed run its own process had claimed again (a later attempt there, started while it ran) lost its lease: explained, not a breach", () => {
    // Process 1 froze past the lease, claimed item 2 again itself, and was killed before it reported the loss.
    const runs = [run(1, 0, 10), run(2, 10, null), run(2, 50, null, { attempt: 2 }), run(2, 120, 130, { pid: 2, attempt: 3 }), run(3, 140, 150, { pid: 2 })]
    const leaseEnd = (r: GroupRun) => (r.pid === 1 && r.item === 2 && r.attempt === 2 ? 100 : undefined)
    const lost = supersededInProcess(runs)
    expect(runs.map(lost)).toEqual([false, true, false, false, false])
    const v = judge(runs, leaseEnd, new Set([1]), lost)
    expect([v.disorder, v.overlaps, v.rerunsAfterKill, v.rerunsAfterLeaseEnd, v.afterLostLease]).toEqual([[], [], 1, 1, 1])
    // Without it: an overlap (the stale run has no known lease end) and a rerun not known to follow it.
    const strict = judge(runs, leaseEnd, new Set([1]))
    expect([strict.overlaps.length, strict.rerunsAfterKill, strict.rerunsAfterLeaseEnd]).toEqual([1, 2, 1])
    // Another process's later run is no such proof.
    const elsewhere = [run(2, 10, null), run(2, 50, 60, { pid: 2, attempt: 2 })]
    expect(elsewhere.map(supersededInProcess(elsewhere))).toEqual([false, false])
  })

  it("counts the most runs of a group at once, a killed run until its lease's end", () => {
    const runs = [run(1, 0, 10), run(2, 0, null), run(3, 5, 15), run(4, 12, 20, { group: "h" })]
    expect(mostPerGroup(runs, () => 8, 3)).toEqual({ most: 3, over: [] })
    expect(mostPerGroup(runs, () => 8, 2).over.length).toBe(1)
    // Ended at its start (runs that returned only), the killed run counts for nothing.
    expect(mostPerGroup(runs, (r) => r.start, 2).most).toBe(2)
    // Without a known lease end, forever.
    const late = [run(2, 0, null), run(5, 100, 110)]
    expect([mostPerGroup(late, none, 1).most, mostPerGroup(late, () => 8, 1).most]).toEqual([2, 1])
  })
})
