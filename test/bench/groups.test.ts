/**
 * The groups benchmark (bench/groups.ts) on tiny sizes, Docket only (the
 * peers need their packages and take minutes): the same code path as
 * `npx tsx bench/groups.ts` (fresh stores, worker processes, the checks of
 * the handlers' records), and the checks themselves on records that break
 * each promise.
 */
import { afterAll, describe, expect, it } from "vitest"
import { renderGroups, runGroups, violations } from "../../bench/groups.js"
import type { GroupSample, GroupSizes } from "../../bench/lib/groupWorkloads.js"
import { check } from "../../bench/lib/groupWorkers.js"
import { closeAdmin } from "../../bench/lib/stores.js"
import { PG_ADMIN_URL, pgAvailable } from "../support/db.js"

afterAll(() => closeAdmin())

const sizes: GroupSizes = {
  groups: 10,
  perGroup: 4,
  slots: 5,
  big: 60,
  small: 3,
  smallEach: 2,
  backlog: 400,
  backlogGroups: 40,
  drain: 80
}

describe("groups benchmark (smoke)", () => {
  it("runs W7, W8 and G6 for Docket, each run kept its groups' order and limit", { timeout: 600_000 }, async () => {
    const lines: Array<string> = []
    const samples = await runGroups({
      workloads: ["W7", "W8", "G6"],
      systems: ["docket"],
      stores: pgAvailable ? ["pg", "sqlite"] : ["sqlite"],
      procs: [2],
      repeat: 1,
      sizes,
      env: { pgAdminUrl: PG_ADMIN_URL, redisUrl: "", redisDb: 0 },
      log: (line) => lines.push(line)
    })
    const stores = pgAvailable ? 2 : 1
    // W7 with 2 processes, W8 with two limits, G6 grouped and not: 5 runs a store.
    expect(samples).toHaveLength(5 * stores)
    expect(samples.flatMap((s) => violations(s).map((v) => `${s.workload} ${s.store}: ${v}`)), lines.join("\n")).toEqual([])
    for (const s of samples.filter((s) => s.workload === "W7")) expect(s.check?.distinct).toBe(40)
    for (const s of samples.filter((s) => s.workload === "W8")) expect(s.latency?.n).toBe(6)
    const markdown = renderGroups(samples, sizes)
    expect(markdown).toContain("W7 sequences")
    expect(markdown).toContain("Docket (SQLite)")
  })

  it("the checks find a run out of order, two of a group at once, and an item run twice", () => {
    // Records: index, group, start, end.
    const inOrder = [0, 1, 10, 11, 1, 1, 12, 13, 2, 2, 10, 20]
    expect(check(inOrder)).toMatchObject({ runs: 3, distinct: 3, outOfOrder: 0, maxAtOnce: 1 })
    const sample = (records: Array<number>): GroupSample => ({
      workload: "W7", system: "docket", store: "sqlite", procs: 1, load: 0,
      limit: { concurrency: 1, ordered: true }, check: check(records), expected: records.length / 4
    })
    expect(violations(sample(inOrder))).toEqual([])
    expect(violations(sample([1, 1, 10, 11, 0, 1, 12, 13]))).toEqual(["1 runs out of enqueue order"])
    expect(violations(sample([0, 1, 10, 15, 1, 1, 12, 13]))).toEqual(["2 of a group at once"])
    expect(violations(sample([0, 1, 10, 11, 0, 1, 12, 13]))[0]).toBe("1 items ran twice")
  })
})
