import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { Claim } from "../../src/Domain.js"
import { StorageError } from "../../src/Errors.js"
import * as Renewer from "../../src/internal/worker/renewer.js"
import type { Running } from "../../src/internal/worker/state.js"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { claimed, cleanup, freshRepo, makePublisher, row, runOf } from "../support/worker.js"

afterAll(cleanup)

const LEASE_MS = 60_000

/** One renewal round over these runs and unwritten claims, at local time `now`; returns the runs it lost. */
const renew = (repo: QueueRepo.Service, runs: ReadonlyArray<Running>, unrecorded: ReadonlyArray<Claim>, now: number) =>
  Effect.gen(function*() {
    const lost: Array<Running> = []
    yield* Renewer.renewOnce({
      repo,
      leaseMs: LEASE_MS,
      running: new Set(runs),
      unrecorded: () => unrecorded,
      publisher: yield* makePublisher(),
      onLost: (entry) => Effect.sync(() => lost.push(entry)),
      now: () => now
    })
    return lost
  })

// The lease renewer (src/internal/worker/renewer.ts) on a real SQLite file.
describe("the renewer", () => {
  it.live("renews the leases of running items and of outcomes not yet written, and moves the runs' deadlines", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const [a, b] = yield* claimed(repo, 2)
      // Both leases nearly over (on the database's clock).
      yield* sql.unsafe("UPDATE docket_items SET lease_until = 1000")
      const run = runOf(a, 1_500)
      const lost = yield* renew(repo, [run], [b], 1_000)
      expect(lost).toEqual([])
      expect(run.lost).toBe(false)
      expect(run.deadline).toBe(1_000 + LEASE_MS)
      const soon = Date.now() + LEASE_MS / 2
      expect((yield* row(sql, a.id)).lease_until!).toBeGreaterThan(soon)
      expect((yield* row(sql, b.id)).lease_until!).toBeGreaterThan(soon)
    })))

  it.live("a lease another worker took: only that run is lost, and the other worker keeps the item", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const [a, b] = yield* claimed(repo, 2)
      yield* sql.unsafe("UPDATE docket_items SET lease_until = 0 WHERE id = ?", [a.id])
      const [taken] = yield* repo.claim({ worker: "w2", limit: 1, lease: "1 minute" })
      expect(taken.id).toBe(a.id)
      const runA = runOf(a, 1_500)
      const runB = runOf(b, 1_500)
      const lost = yield* renew(repo, [runA, runB], [], 1_000)
      expect(lost).toEqual([runA])
      expect(runA.lost).toBe(true)
      expect(runA.deadline).toBe(1_500)
      expect(runB.lost).toBe(false)
      expect(runB.deadline).toBe(1_000 + LEASE_MS)
      const stored = yield* row(sql, a.id)
      expect(stored.claimed_by).toBe("w2")
      expect(Number(stored.lease_seq)).toBe(taken.token)
    })))

  it.live("a refused renewal of a cancelled item: the run is lost and marked cancelled; a lease another worker took is only lost", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const [a, b, c] = yield* claimed(repo, 3)
      expect(yield* repo.cancel([a.id], { reason: "stop" })).toEqual(["cancelledRunning"])
      yield* sql.unsafe("UPDATE docket_items SET lease_until = 0 WHERE id = ?", [b.id])
      const [taken] = yield* repo.claim({ worker: "w2", limit: 1, lease: "1 minute" })
      expect(taken.id).toBe(b.id)
      const [runA, runB, runC] = [a, b, c].map((claim) => runOf(claim, 1_500))
      const lost = yield* renew(repo, [runA, runB, runC], [], 1_000)
      expect(lost).toEqual([runA, runB])
      expect([runA.lost, runA.cancelled]).toEqual([true, "Cancelled: stop"])
      expect([runB.lost, runB.cancelled]).toEqual([true, undefined])
      expect([runC.lost, runC.cancelled, runC.deadline]).toEqual([false, undefined, 1_000 + LEASE_MS])
    })))

  it.live("when the database refuses the renewal, only the runs whose lease surely ran out are lost", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const [a, b] = yield* claimed(repo, 2)
      yield* sql.unsafe(
        "CREATE TRIGGER refuse BEFORE UPDATE ON docket_items BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
      )
      const expired = runOf(a, 999)
      const current = runOf(b, 1_001)
      const lost = yield* renew(repo, [expired, current], [], 1_000)
      expect(lost).toEqual([expired])
      expect(expired.lost).toBe(true)
      expect(current.lost).toBe(false)
      expect(current.deadline).toBe(1_001)
    })))

  it.live("runs already lost are not renewed again; nothing to renew sends nothing", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const [a] = yield* claimed(repo, 1)
      const run = runOf(a, 5)
      run.lost = true
      let calls = 0
      const counted: QueueRepo.Service = {
        ...repo,
        extendMany: (claims, lease) => Effect.zipRight(Effect.sync(() => calls++), repo.extendMany(claims, lease))
      }
      expect(yield* renew(counted, [run], [], 1_000)).toEqual([])
      expect(calls).toBe(0)
      expect(run.deadline).toBe(5)
    })))

  // A database gone silent: the statement never answers, and its cancel hangs too.
  it.live("a renewal with no answer ends at the earliest deadline: those runs are lost, and it does not wait for the cancel", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const [a, b] = yield* claimed(repo, 2)
      const silent: QueueRepo.Service = {
        ...repo,
        extendMany: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sleep("1 hour")))
      }
      const leaseMs = 1200
      const start = performance.now()
      const soon = runOf(a, start + 300)
      const later = runOf(b, start + 5_000)
      const lost: Array<Running> = []
      yield* Renewer.renewOnce({
        repo: silent,
        leaseMs,
        running: new Set([soon, later]),
        unrecorded: () => [],
        publisher: yield* makePublisher(),
        onLost: (entry) => Effect.sync(() => lost.push(entry))
      })
      const tookMs = performance.now() - start
      expect(lost).toEqual([soon])
      expect(later.lost).toBe(false)
      // Bounded by the earliest deadline, never by the cancel.
      expect(tookMs).toBeGreaterThanOrEqual(300 - 5)
      expect(tookMs).toBeLessThan(1000)
    })))

  it.live("a run already past its deadline is lost without asking: the renewal carries only the others", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const [a, b] = yield* claimed(repo, 2)
      const carried: Array<number> = []
      const counted: QueueRepo.Service = {
        ...repo,
        extendMany: (claims, lease) => Effect.zipRight(Effect.sync(() => carried.push(...claims.map((c) => c.id))), repo.extendMany(claims, lease))
      }
      const overdue = runOf(a, 1_000)
      const current = runOf(b, 1_001)
      const lost = yield* renew(counted, [overdue, current], [], 1_000)
      expect(lost).toEqual([overdue])
      expect(carried).toEqual([b.id])
      expect(current.deadline).toBe(1_000 + LEASE_MS)
    })))

  // A server restarting or failing over: every renewal is refused at once.
  // The time is the TestClock's (the renewer's sleeps and its `now`).
  it.effect("after refused renewals, rounds come more often as a deadline nears: each run stops within 10 ms of its own", () =>
    Effect.scoped(Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const [a, b] = yield* claimed(repo, 2)
      let sent = 0
      const refusing: QueueRepo.Service = {
        ...repo,
        extendMany: () =>
          Effect.zipRight(
            Effect.sync(() => sent++),
            Effect.fail(new StorageError({ operation: "extend lease", cause: new Error("connection refused") }))
          )
      }
      const clock = yield* Effect.clock
      const now = () => clock.unsafeCurrentTimeMillis()
      const soon = runOf(a, 400)
      const later = runOf(b, 2_500)
      const lost: Array<readonly [Running, number]> = []
      yield* Effect.forkScoped(Renewer.run({
        repo: refusing,
        leaseMs: 3_000, // a round every second while renewals work
        running: new Set([soon, later]),
        unrecorded: () => [],
        publisher: yield* makePublisher(),
        onLost: (entry) => Effect.sync(() => lost.push([entry, now()])),
        now
      }))
      yield* TestClock.adjust("2600 millis")
      expect(lost.map(([entry]) => entry)).toEqual([soon, later])
      const [[, soonAt], [, laterAt]] = lost
      expect(soonAt).toBeGreaterThanOrEqual(400)
      expect(soonAt).toBeLessThanOrEqual(410)
      expect(laterAt).toBeGreaterThanOrEqual(2_500)
      expect(laterAt).toBeLessThanOrEqual(2_510)
      // Tried again and again before each deadline, not only once a third of the lease.
      expect(sent).toBeGreaterThan(8)
    })))

  it("the next round: a third of the lease, or half the time left before the earliest deadline, at least 10 ms", () => {
    expect(Renewer.nextRoundIn([], 3_000, 1_000)).toBe(1_000)
    expect(Renewer.nextRoundIn([100_000], 3_000, 1_000)).toBe(1_000)
    expect(Renewer.nextRoundIn([1_400.2, 5_000], 3_000, 1_000)).toBe(201)
    expect(Renewer.nextRoundIn([1_015], 3_000, 1_000)).toBe(10)
    expect(Renewer.nextRoundIn([999], 3_000, 1_000)).toBe(10)
  })

  it("a renewal's bound: until the earliest deadline, at most the lease", () => {
    expect(Renewer.renewalBound([5_000, 2_000], 3_000, 1_000)).toBe(1_000)
    expect(Renewer.renewalBound([1_100], 3_000, 1_000)).toBe(100)
    expect(Renewer.renewalBound([], 3_000, 1_000)).toBe(3_000)
    expect(Renewer.renewalBound([100_000], 3_000, 1_000)).toBe(3_000)
  })
})
