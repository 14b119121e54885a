/**
 * Kinds a person operates (pause, global concurrency and rate limits, who
 * set them), run against every backend from the shared store suite (./suite.ts).
 * Time is moved by editing rows (a lease ended, a rate slot aged), never by
 * sleeping.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { InvalidInput } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, expireLease, unsafe } from "../support/db.js"
import { withRepo } from "../support/harness.js"

const Repo = QueueRepo.QueueRepo
const lease = "1 minute"

const enqueueN = (kind: string, n: number) =>
  Effect.flatMap(Repo, (repo) => repo.enqueueMany(Array.from({ length: n }, (_, i) => ({ kind, payload: { i } }))))

const claim = (options: Partial<QueueRepo.ClaimOptions> = {}) =>
  Effect.flatMap(Repo, (repo) => repo.claim({ worker: "w", limit: 100, lease, ...options }))

const byKind = (claims: ReadonlyArray<QueueRepo.Claim>) => {
  const counts: Record<string, number> = {}
  for (const c of claims) counts[c.kind] = (counts[c.kind] ?? 0) + 1
  return counts
}

const kindInfo = (kind: string) =>
  Effect.map(Effect.flatMap(Repo, (repo) => repo.listKinds), (kinds) => kinds.find((k) => k.kind === kind))

// Ages every slot of a kind's rate by `ms` (as if its starts were that much older).
const ageSlots = (kind: string, ms: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => unsafe("UPDATE docket_kind_slots SET started_at = started_at - $1 WHERE kind = $2", [ms, kind]),
      orElse: () => sql.unsafe("UPDATE docket_kind_slots SET started_at = started_at - ? WHERE kind = ?", [ms, kind])
    }))

const slotCount = (kind: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => unsafe<{ n: string | number }>("SELECT count(*) AS n FROM docket_kind_slots WHERE kind = $1", [kind]),
      orElse: () => sql.unsafe<{ n: string | number }>("SELECT count(*) AS n FROM docket_kind_slots WHERE kind = ?", [kind])
    })).pipe(Effect.map((rows) => Number(rows[0].n)))

const pauseAndLimits = (backend: Backend) => {
  it.live("a paused kind is not claimed (nor its expired leases); its enqueues are kept; resume claims it", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* enqueueN("p", 3)
      yield* enqueueN("q", 2)
      const [held] = yield* claim({ kinds: ["p"], limit: 1 })
      yield* expireLease(held.id)
      yield* repo.pauseKind("p")
      yield* enqueueN("p", 1)
      expect(byKind(yield* claim())).toEqual({ q: 2 })
      expect(yield* claim({ kinds: ["p"] })).toEqual([])
      expect((yield* kindInfo("p"))).toMatchObject({ paused: true, counts: { waiting: 3, expired: 1 } })
      yield* repo.resumeKind("p")
      expect(byKind(yield* claim())).toEqual({ p: 4 })
    })))

  it.live("a global concurrency limit: live leases count, an ended lease frees its place, a raise applies at once", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* enqueueN("c", 10)
      yield* enqueueN("u", 3)
      yield* repo.setKindLimits("c", { concurrency: 2 })
      expect(byKind(yield* claim())).toEqual({ c: 2, u: 3 })
      // Another worker: the two places are taken.
      expect(yield* claim({ worker: "other" })).toEqual([])
      // One lease ends (its worker died): one place frees, and its item is due again.
      const running = (yield* repo.listKinds).find((k) => k.kind === "c")!
      expect(running.counts.running).toBe(2)
      const [first] = yield* Effect.flatMap(repo.get(1), (item) => Effect.succeed(Option.toArray(item)))
      yield* expireLease(first.id)
      const again = yield* claim({ worker: "other" })
      expect(again.map((c) => c.kind)).toEqual(["c"])
      expect(yield* claim({ worker: "other" })).toEqual([])
      yield* repo.setKindLimits("c", { concurrency: 5 })
      expect(byKind(yield* claim())).toEqual({ c: 3 })
      yield* repo.setKindLimits("c", { concurrency: null })
      expect(byKind(yield* claim())).toEqual({ c: 5 })
    })))

  it.live("a finished item frees its place for the next claim", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* enqueueN("c", 3)
      yield* repo.setKindLimits("c", { concurrency: 1 })
      const [one] = yield* claim()
      expect(yield* claim()).toEqual([])
      expect(yield* repo.complete(one)).toBe(true)
      expect((yield* claim()).length).toBe(1)
    })))

  it.live("limited kinds are claimed only up to limitedMax (the pool's free slots), others fill the batch", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* enqueueN("c", 5)
      yield* enqueueN("u", 5)
      yield* repo.setKindLimits("c", { concurrency: 4 })
      expect(byKind(yield* claim({ limit: 6, limitedMax: 1 }))).toEqual({ c: 1, u: 5 })
      expect(byKind(yield* claim({ limit: 6, limitedMax: 0 }))).toEqual({})
      expect(byKind(yield* claim({ limit: 6 }))).toEqual({ c: 3 })
      yield* Effect.flip(claim({ limit: 2, limitedMax: 3 })).pipe(
        Effect.map((e) => expect(e).toBeInstanceOf(InvalidInput))
      )
    })))
}

const ratesAndDeclarations = (backend: Backend) => {
  it.live("a rate limit: at most N claims per period, each slot's starts a period apart; next-due waits for a slot", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* enqueueN("r", 10)
      yield* repo.setKindLimits("r", { rate: { limit: 3, period: "1 hour" } })
      expect(yield* slotCount("r")).toBe(3)
      const first = yield* claim({ lease: "2 hours" })
      expect(first.length).toBe(3)
      expect(yield* claim()).toEqual([])
      // The next slot frees in about an hour (before the leases end), and the pool is told so.
      const wait = Option.getOrThrow(yield* repo.nextDueIn)
      expect(Duration.toMillis(wait)).toBeGreaterThan(3_500_000)
      expect(Duration.toMillis(wait)).toBeLessThanOrEqual(3_600_000)
      // Every start was recorded at its claim's time: age them by a period, and three more may start.
      yield* ageSlots("r", 3_600_000)
      expect((yield* claim({ lease: "2 hours" })).length).toBe(3)
      // A start slot only partly aged: none free yet.
      yield* ageSlots("r", 3_599_000)
      expect(yield* claim()).toEqual([])
      // Raising the limit adds slots never used (start at once); lowering keeps the newest starts.
      yield* repo.setKindLimits("r", { rate: { limit: 5, period: "1 hour" } })
      expect(yield* slotCount("r")).toBe(5)
      expect((yield* claim()).length).toBe(2)
      yield* repo.setKindLimits("r", { rate: { limit: 2, period: "1 hour" } })
      expect(yield* slotCount("r")).toBe(2)
      expect(yield* claim()).toEqual([])
      yield* repo.setKindLimits("r", { rate: null })
      expect(yield* slotCount("r")).toBe(0)
      expect((yield* claim()).length).toBe(2)
    })))

  it.live("claimedAt is the claim's time on the database clock", () =>
    withRepo(backend, Effect.gen(function*() {
      yield* enqueueN("t", 1)
      const before = Date.now()
      const [c] = yield* claim()
      expect(c.leaseUntil - c.claimedAt).toBe(60_000)
      // Same machine: the database's clock and ours agree within a second.
      expect(Math.abs(c.claimedAt - before)).toBeLessThan(1000)
    })))

  it.live("a person's limits win over a handler's declaration until reset; code's are rewritten by code", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      // No row for a kind with nothing declared.
      expect(yield* repo.declareKindLimits("plain", {})).toBe(false)
      expect(yield* kindInfo("plain")).toBeUndefined()
      expect(yield* repo.declareKindLimits("k", { concurrency: 3 })).toBe(true)
      expect(yield* kindInfo("k")).toMatchObject({ concurrency: 3, rate: null, limitsSetBy: "code" })
      // The same declaration again changes nothing.
      expect(yield* repo.declareKindLimits("k", { concurrency: 3 })).toBe(false)
      yield* repo.setKindLimits("k", { rate: { limit: 10, period: "1 second" } })
      // The person's setting keeps the concurrency (undefined) and adds a rate.
      expect(yield* kindInfo("k")).toMatchObject({ concurrency: 3, rate: { limit: 10, periodMs: 1000 }, limitsSetBy: "person" })
      expect(yield* repo.declareKindLimits("k", { concurrency: 7 })).toBe(false)
      expect(yield* kindInfo("k")).toMatchObject({ concurrency: 3, limitsSetBy: "person" })
      yield* repo.resetKindLimits("k")
      expect(yield* kindInfo("k")).toMatchObject({ concurrency: null, rate: null, limitsSetBy: "code" })
      expect(yield* repo.declareKindLimits("k", { concurrency: 7 })).toBe(true)
      // Code that declares nothing any more clears what code declared before.
      expect(yield* repo.declareKindLimits("k", {})).toBe(true)
      expect(yield* kindInfo("k")).toMatchObject({ concurrency: null, rate: null })
      // Pause is a person's alone: a declaration leaves it.
      yield* repo.pauseKind("k")
      yield* repo.declareKindLimits("k", { concurrency: 1 })
      expect(yield* kindInfo("k")).toMatchObject({ paused: true, concurrency: 1 })
    })))
}

const refusedAndListed = (backend: Backend) => {
  it.live("bad limits and kinds are refused with a typed error, and nothing is written", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const refused = (effect: Effect.Effect<unknown, unknown>, field: string) =>
        Effect.map(Effect.flip(effect), (e) => {
          expect(e).toBeInstanceOf(InvalidInput)
          expect((e as InvalidInput).field).toBe(field)
        })
      yield* refused(repo.setKindLimits("k", { concurrency: 0 }), "concurrency")
      yield* refused(repo.setKindLimits("k", { concurrency: -1 }), "concurrency")
      yield* refused(repo.setKindLimits("k", { concurrency: 1.5 }), "concurrency")
      yield* refused(repo.setKindLimits("k", { rate: { limit: 0, period: "1 second" } }), "rate")
      yield* refused(repo.setKindLimits("k", { rate: { limit: 5, period: 0 } }), "rate")
      yield* refused(repo.setKindLimits("k", { rate: { limit: 100_000, period: "1 second" } }), "rate")
      yield* refused(repo.setKindLimits("k", {}), "concurrency")
      yield* refused(repo.setKindLimits("bad kind", { concurrency: 1 }), "kind")
      yield* refused(repo.pauseKind(""), "kind")
      yield* refused(repo.declareKindLimits("k", { concurrency: 0 }), "concurrency")
      expect(yield* repo.listKinds).toEqual([])
    })))

  it.live("listKinds: every kind with items or controls, with counts by state", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* enqueueN("a", 2)
      yield* repo.enqueue("a", { later: true }, { delay: "1 hour" })
      yield* repo.pauseKind("z")
      const [c] = yield* claim({ limit: 1 })
      yield* repo.fail(c, "boom", { _tag: "Dead" })
      yield* enqueueN("a", 1)
      const [d] = yield* claim({ limit: 1 })
      expect(yield* repo.complete(d)).toBe(true)
      expect(yield* repo.listKinds).toEqual([
        {
          kind: "a",
          paused: false,
          concurrency: null,
          rate: null,
          limitsSetBy: "code",
          perGroup: null,
          pausedGroups: 0,
          counts: { waiting: 1, scheduled: 1, running: 0, expired: 0, done: 1, dead: 1, cancelled: 0 }
        },
        {
          kind: "z",
          paused: true,
          concurrency: null,
          rate: null,
          limitsSetBy: "code",
          perGroup: null,
          pausedGroups: 0,
          counts: { waiting: 0, scheduled: 0, running: 0, expired: 0, done: 0, dead: 0, cancelled: 0 }
        }
      ])
    })))
}

export const kindsSuite = (backend: Backend) => {
  describe("kinds a person operates", () => {
    pauseAndLimits(backend)
    ratesAndDeclarations(backend)
    refusedAndListed(backend)
  })
}
