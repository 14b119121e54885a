/**
 * The benchmark report's target lines, from results built by hand (the report
 * is a function of the samples; the harness that measures them has its own
 * smoke test, test/bench/smoke.test.ts).
 */
import { describe, expect, it } from "vitest"
import { load, type Name } from "../../bench/adapters/registry.js"
import type { Result, Sample } from "../../bench/lib/harness.js"
import { render } from "../../bench/lib/report.js"

const machine = {
  date: "test", cores: 2, cpu: "test", memoryGb: 1, loadAverage: "0", node: process.version, postgres: "test",
  redis: "none", pgStatStatements: false, commit: "test", dirty: [], packages: {}
}

/** A W2 sample; a rate of undefined is a run that failed. */
const drain = (contender: Name, procs: number, rate: number | undefined): Sample =>
  rate === undefined
    ? { contender, kind: "W2", procs, rep: 1, values: {}, error: "failed" }
    : { contender, kind: "W2", procs, rep: 1, values: { rate, peakRssMb: 100 }, once: { ok: true, missing: 0, duplicates: 0, detail: "" } }

const targetLine = async (rates: Record<string, [number | undefined, number | undefined]>): Promise<string | undefined> => {
  const names = Object.keys(rates) as Array<Name>
  const result: Result = {
    options: {
      contenders: names, workloads: ["W2"], repeat: 1,
      sizes: { bulk: 1, one: 1, drain: 1, latency: 1, latencyIntervalMs: 1, oneWarmup: 1, latencyWarmup: 1, retry: 1, concurrency: 10 },
      env: { pgAdminUrl: "", redisUrl: "", redisDb: 0 }
    },
    contenders: await Promise.all(names.map(load)),
    skipped: [],
    samples: names.flatMap((n) => [drain(n, 1, rates[n][0]), drain(n, 2, rates[n][1])]),
    startedAt: new Date(),
    durationMs: 1
  }
  return render(result, machine).split("\n").find((l) => l.startsWith("| W2 drain on PostgreSQL ahead of every peer"))
}

describe("benchmark report: W2 ahead of every peer", () => {
  it("is met only when Docket leads with one process and with two", async () => {
    const both = await targetLine({ "docket-pg": [30000, 25000], "graphile-worker-lq": [15000, 24000], bullmq: [7000, 6000] })
    // (The local queue's label carries the installed graphile-worker 0.17's version, if any.)
    expect(both).toMatch(/1 process: 30,000 vs next 15,000 jobs\/s \(graphile-worker [0-9.]+ local queue\) = 2\.00x/)
    expect(both).toContain("2 processes: 25,000 vs next 24,000 jobs/s")
    expect(both).toMatch(/\| met \|$/)
    const oneOnly = await targetLine({ "docket-pg": [30000, 23000], "graphile-worker-lq": [15000, 24000], bullmq: [7000, 6000] })
    expect(oneOnly).toContain("= 0.96x")
    expect(oneOnly).toMatch(/\*\*not met\*\* \|$/)
  })

  it("is not met when behind with one process, whatever else is missing; unknown when a figure is missing", async () => {
    const behindOneMissingTwo = await targetLine({ "docket-pg": [10000, undefined], "graphile-worker-lq": [15000, 24000] })
    expect(behindOneMissingTwo).toContain("2 processes: n/a")
    expect(behindOneMissingTwo).toMatch(/\*\*not met\*\* \|$/)
    // Docket's two-process run failed: not judged on one process alone.
    const docketMissing = await targetLine({ "docket-pg": [30000, undefined], "graphile-worker-lq": [15000, 24000] })
    expect(docketMissing).not.toMatch(/\| met \|$/)
    expect(docketMissing).not.toMatch(/not met/)
    // The leading peer's two-process run failed: Docket ahead of the rest is not enough.
    const peerMissing = await targetLine({ "docket-pg": [30000, 25000], "graphile-worker-lq": [15000, undefined], bullmq: [7000, 6000] })
    expect(peerMissing).toContain("2 processes: 25,000 vs next 6,000 jobs/s")
    expect(peerMissing).not.toMatch(/\| met \|$/)
    expect(peerMissing).not.toMatch(/not met/)
  })
})
