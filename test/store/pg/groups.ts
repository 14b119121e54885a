/**
 * PostgreSQL only: an ordered group whose head is locked by another
 * transaction (its holder failing it, a person cancelling it) at the moment of
 * a claim. The claim skips locked rows and never waits (migrations/pg/0017_groups.sql),
 * so it must notice the head is missing and start nothing of the group, not
 * the item behind it; once the lock is gone the head is claimed as usual.
 * Also: a group's resume notifies idle pools at its commit; a per-group rate
 * stays exact under claims racing from separate pools. Registered by
 * test/store/pgOnly.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { pools, racing } from "../../support/pg.js"
import { type Backend, pgSession, repoLayer, schemaOf } from "../../support/db.js"

/** Registers these tests for the PostgreSQL backend. */
export const pgGroupsTests = (backend: Backend) => {
  it.live("an ordered group whose head another transaction holds locked starts nothing until it is free", () =>
    Effect.gen(function*() {
      const { query, repo } = yield* racing(backend)
      yield* repo.declarePerGroup("seq", { concurrency: 1, ordered: true })
      const [first, second] = yield* repo.enqueueMany([
        { kind: "seq", payload: 1, group: "a" },
        { kind: "seq", payload: 2, group: "a" },
        { kind: "seq", payload: 3, group: "b" }
      ])
      yield* query("BEGIN")
      yield* query("SELECT id FROM docket_items WHERE id = $1 FOR UPDATE", [first.id])
      // Group b goes on; group a's head is locked: neither it nor the item behind it is taken.
      const during = yield* repo.claim({ worker: "w", limit: 10, lease: 30_000 })
      expect(during.map((c) => c.group)).toEqual(["b"])
      yield* query("ROLLBACK")
      const after = yield* repo.claim({ worker: "w", limit: 10, lease: 30_000 })
      expect(after.map((c) => c.id)).toEqual([first.id])
      expect(after.map((c) => c.id)).not.toContain(second.id)
    }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

  it.live("a group's resume notifies idle pools at its commit (every process's); a pause, or a resume of a group not paused, does not", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const repo = Context.get(yield* Layer.build(repoLayer(url)), QueueRepo.QueueRepo)
      const listener = yield* pgSession(url)
      const heard: Array<string> = []
      listener.on("notification", (n) => heard.push(n.channel))
      const channel = schemaOf(url).itemsChannel
      yield* Effect.promise(() => listener.query(`LISTEN "${channel}"`))
      // A round trip of the listener's own: a notification committed before it is delivered before its answer.
      const roundTrip = Effect.promise(() => listener.query("SELECT 1"))
      yield* repo.pauseGroup("k", "a")
      yield* repo.resumeGroup("k", "never-paused")
      yield* roundTrip
      expect(heard).toEqual([])
      yield* repo.resumeGroup("k", "a")
      yield* roundTrip
      expect(heard).toEqual([channel])
    }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

  it.live("a per-group rate is exact under claims racing from three separate pools: each group starts its limit, no more, no less", () =>
    Effect.gen(function*() {
      const contexts = yield* pools(backend, 3)
      const repos = contexts.map((c) => Context.get(c, QueueRepo.QueueRepo))
      yield* repos[0].declarePerGroup("r", { concurrency: 100, rate: { limit: 5, period: "1 hour" } })
      yield* repos[0].enqueueMany(
        Array.from({ length: 4 * 20 }, (_, n) => ({ kind: "r", payload: n, group: `g${n % 4}` }))
      )
      const batches = yield* Effect.all(
        Array.from({ length: 30 }, (_, n) => repos[n % 3].claim({ worker: `w${n}`, limit: 3, lease: 60_000, kinds: ["r"] })),
        { concurrency: "unbounded" }
      )
      const perGroup = new Map<string, number>()
      for (const c of batches.flat()) perGroup.set(c.group!, (perGroup.get(c.group!) ?? 0) + 1)
      expect([...perGroup.entries()].sort()).toEqual([["g0", 5], ["g1", 5], ["g2", 5], ["g3", 5]])
      // Without the rate, 90 places for 80 items would have started them all.
    }).pipe(Effect.scoped, Effect.timeout("60 seconds")))
}
