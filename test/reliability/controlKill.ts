/**
 * The kill scenario's drive (kill.ts) with its kind limited to 5 across 3
 * workers of 10 slots, on PostgreSQL (test/reliability/control.ts registers
 * it): the kill scenario's rules, and never more than 5 running at once by the
 * execution records (a run that never finished ends when its process was seen
 * gone; counted the claim's way too, until its lease ran out).
 */
import { Effect, ManagedRuntime } from "effect"
import { expect } from "vitest"
import * as QueueRepo from "../../src/QueueRepo.js"
import { repoLayer } from "../support/db.js"
import { maxRunning, profile } from "./controlRuns.js"
import { expectKillRules, judgeKills, runKillDrive } from "./kill.js"
import { report, scaled } from "./support.js"

/** Runs and checks it (see the module doc). */
export const killScenarioLimited = async () => {
  const limit = 5
  const run = await runKillDrive({
    jobs: scaled(500, 100),
    prepare: async (url) => {
      const runtime = ManagedRuntime.make(repoLayer(url))
      try {
        await runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (r) => r.setKindLimits("rel.record", { concurrency: limit })))
      } finally {
        await runtime.dispose()
      }
    }
  })
  const verdict = judgeKills(run)
  const goneAt = new Map(run.kills.map((k) => [k.name, k.exitedAt]))
  const executions = [...run.byJob.values()].flat()
  // A run that never finished ends when its process was seen gone (one of a worker never killed: never);
  // counted the claim's way, when its lease ran out.
  const most = maxRunning(profile(executions.map((e) => ({
    start: e.startedAt,
    end: e.finishedAt ?? goneAt.get(e.worker) ?? Infinity
  }))))
  const mostLeased = maxRunning(profile(executions.map((e) => ({
    start: e.startedAt,
    end: e.finishedAt ?? run.leaseEnds.get(`${e.worker} ${e.itemId}`) ?? goneAt.get(e.worker) ?? Infinity
  }))))
  report("control kill (pg)", {
    ...verdict.figures,
    limit,
    maxConcurrent: most,
    overshoot: Math.max(0, most - limit),
    maxConcurrentCountingDeadLeases: mostLeased,
    overshootCountingDeadLeases: Math.max(0, mostLeased - limit)
  })
  expectKillRules(run, verdict)
  expect(most).toBeLessThanOrEqual(limit)
  expect(mostLeased).toBeLessThanOrEqual(limit)
}
