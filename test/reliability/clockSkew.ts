/**
 * Clock skew (PostgreSQL): a `docket worker` process whose clock is 10
 * minutes fast (a preload shifts `Date.now()` and `new Date()`) meets an item
 * leased by another worker for 4 more minutes and an item scheduled 5
 * minutes out. By its own clock both are due; by the database's
 * (`docket_now_ms()`) neither is. It takes neither, while it does run items
 * that are due; once the database's clock says they are due, it runs them.
 */
import { Effect, ManagedRuntime, Option } from "effect"
import { describe, expect, it } from "vitest"
import * as QueueRepo from "../../src/QueueRepo.js"
import { expireLease, freshPgDatabase, makeDue, pgAvailable, repoLayer } from "../support/db.js"
import { fixture, killWorker, report, startWorker, stopWorker, type WorkerProcess } from "./support.js"

const SHIFT_MS = 10 * 60_000

export const clockSkewScenario = () =>
  describe.skipIf(!pgAvailable)("clock skew: a worker 10 minutes fast (PostgreSQL)", () => {
    it("takes no leased item early and runs no scheduled item early", async () => {
      const db = await freshPgDatabase()
      const runtime = ManagedRuntime.make(repoLayer(db.url))
      const repo = <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) =>
        runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, f))
      let worker: WorkerProcess | undefined
      try {
        // Leased by another worker for 4 more minutes (database clock).
        const leased = await repo((r) => r.enqueue("rel.skew", { what: "leased" }))
        const [claim] = await repo((r) => r.claim({ worker: "elsewhere:1", limit: 1, lease: "4 minutes" }))
        expect(claim.id).toBe(leased.id)
        // Scheduled 5 minutes out.
        const scheduled = await repo((r) => r.enqueue("rel.skew", { what: "scheduled" }, { delay: "5 minutes" }))
        const control = await repo((r) => r.enqueue("rel.skew", { what: "due now" }))

        worker = startWorker({
          database: db.url,
          tasks: fixture("skew"),
          nodeArgs: ["--import", fixture("skew", "_clock-ahead.mjs")],
          args: ["--poll", "200ms"],
          env: { RELIABILITY_CLOCK_SHIFT_MS: String(SHIFT_MS) },
          keep: /^skew-clock |^\S+ (started|done) rel\.skew /
        })
        // Its clock really is 10 minutes fast.
        const line = await worker.waitForLine(new RegExp(`^skew-clock item=${control.id} `), 60_000)
        const seen = Number(/now=(\d+)/.exec(line)![1])
        const skew = seen - Date.now()
        expect(Math.abs(skew - SHIFT_MS)).toBeLessThan(5_000)
        await worker.waitForLine(new RegExp(` done rel\\.skew #${control.id} `), 30_000)

        // Another due item, enqueued after the first ran, is run too: the worker has
        // claimed again since (each claim looked at the leased and the scheduled item).
        const second = await repo((r) => r.enqueue("rel.skew", { what: "due now, later" }))
        await worker.waitForLine(new RegExp(` done rel\\.skew #${second.id} `), 30_000)

        const leasedNow = Option.getOrThrow(await repo((r) => r.get(leased.id)))
        const scheduledNow = Option.getOrThrow(await repo((r) => r.get(scheduled.id)))
        const startedEarly = worker.kept.filter((l) =>
          new RegExp(` started rel\\.skew #(${leased.id}|${scheduled.id}) `).test(l)
        )
        report("clock skew", {
          workerClockAheadMs: skew,
          leasedTakenEarly: leasedNow.claimedBy === "elsewhere:1" ? 0 : 1,
          scheduledRunEarly: scheduledNow.state === "waiting" && scheduledNow.attempts === 0 ? 0 : 1,
          dueItemsRun: 2
        })
        expect(startedEarly).toEqual([])
        expect(leasedNow).toMatchObject({ state: "running", claimedBy: "elsewhere:1", attempts: 1, leaseUntil: claim.leaseUntil })
        expect(scheduledNow).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null })

        // Due by the database's clock: the skewed worker runs both.
        await runtime.runPromise(Effect.zipRight(expireLease(leased.id), makeDue(scheduled.id)))
        await worker.waitForLine(new RegExp(` done rel\\.skew #${leased.id} `), 30_000)
        await worker.waitForLine(new RegExp(` done rel\\.skew #${scheduled.id} `), 30_000)
        // The stale claim of "elsewhere" can no longer change the item (it is gone).
        expect(await repo((r) => r.complete(claim))).toBe(false)
        expect(await stopWorker(worker)).toEqual({ code: 0, signal: null })
      } finally {
        if (worker !== undefined) await killWorker(worker)
        await runtime.dispose()
        await db.drop()
      }
    }, 120_000)
  })
