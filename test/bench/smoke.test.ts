/**
 * The benchmark harness (bench/) on tiny sizes, Docket contenders and the floor only: the
 * same code path as `npm run bench` (fresh stores, worker child processes,
 * the exactly-once check), without Redis or the peers.
 */
import { afterAll, describe, expect, it } from "vitest"
import type { Name } from "../../bench/adapters/registry.js"
import { run } from "../../bench/lib/harness.js"
import { render } from "../../bench/lib/report.js"
import { closeAdmin } from "../../bench/lib/stores.js"
import { PG_ADMIN_URL, pgAvailable } from "../support/db.js"

const docket: Array<Name> = pgAvailable ? ["docket-pg", "docket-sqlite"] : ["docket-sqlite"]
// The floor (W3 only, no library) rides along where PostgreSQL is.
const contenders: Array<Name> = pgAvailable ? [...docket, "pg-floor"] : docket

afterAll(() => closeAdmin())

describe("benchmark harness (smoke)", () => {
  it("runs W1-W4 for Docket and counts every job exactly once", { timeout: 90_000 }, async () => {
    const lines: Array<string> = []
    const result = await run({
      contenders,
      workloads: ["W1", "W2", "W3", "W4"],
      repeat: 1,
      sizes: { bulk: 200, one: 20, drain: 200, latency: 10, latencyIntervalMs: 20, oneWarmup: 10, latencyWarmup: 5, retry: 50, concurrency: 10 },
      w2Procs: [1, 2],
      env: { pgAdminUrl: PG_ADMIN_URL, redisUrl: "redis://127.0.0.1:1", redisDb: 0 },
      log: (line) => lines.push(line)
    })
    expect(result.skipped).toEqual([])
    const failed = result.samples.filter((s) => s.error !== undefined || s.once?.ok !== true)
    expect(failed.map((s) => `${s.contender} ${s.kind}/${s.procs}: ${s.error ?? s.once?.detail}`), lines.join("\n")).toEqual([])
    // W1 once, W2 with one and two processes, W3, W4: five runs per Docket
    // contender; the floor runs W3 alone.
    expect(result.samples).toHaveLength(5 * docket.length + (pgAvailable ? 1 : 0))
    if (pgAvailable) {
      expect(result.samples.filter((s) => s.contender === "pg-floor").map((s) => s.kind)).toEqual(["W3"])
    }
    for (const sample of result.samples.filter((s) => s.kind === "W2")) {
      expect(sample.values.rate).toBeGreaterThan(0)
      expect(sample.values.peakRssMb).toBeGreaterThan(0)
    }
    const markdown = render(result, {
      date: "test",
      cores: 2,
      cpu: "test",
      memoryGb: 1,
      loadAverage: "0",
      node: process.version,
      postgres: "test",
      redis: "none",
      pgStatStatements: false,
      commit: "test",
      dirty: [],
      packages: {}
    })
    expect(markdown).toContain("Docket (SQLite)")
    expect(markdown).toContain("W2 drain jobs/s, 2 procs")
  })
})
