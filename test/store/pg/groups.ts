/**
 * PostgreSQL only: an ordered group whose head is locked by another
 * transaction (its holder failing it, a person cancelling it) at the moment of
 * a claim. The claim skips locked rows and never waits (migrations/pg/0017_groups.sql),
 * so it must notice the head is missing and start nothing of the group, not
 * the item behind it; once the lock is gone the head is claimed as usual.
 * Also: a group's resume notifies idle pools at its commit. Registered by
 * test/store/pgOnly.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { racing } from "../../support/pg.js"
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
}
