/**
 * PostgreSQL only: cancels racing a completion for a row lock; cancel notifications at commit.
 * Registered by test/store/pg.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option, Queue } from "effect"
import pg from "pg"
import * as Complete from "../../../src/internal/sql/claimComplete.js"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { repoLayer, schemaOf } from "../../support/db.js"
import { racing } from "../../support/pg.js"
import type { Backend } from "../../support/db.js"

/** Registers these tests for the PostgreSQL backend. */
export const pgCancelTests = (backend: Backend) => {
  it.live("a cancel that waits for the lock of an item being completed says finished, not unknown", () =>
    Effect.gen(function*() {
      const { query, repo, untilLockWait } = yield* racing(backend)
      const { id } = yield* repo.enqueue("race", 1)
      const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })
      // The complete holds the row (moved to docket_done, not yet committed) while the cancel comes.
      yield* query("BEGIN")
      yield* query(Complete.pgKeep, [[id], [claim.token], null])
      const cancel = yield* Effect.fork(repo.cancel([id]))
      yield* untilLockWait
      yield* query("COMMIT")
      expect(yield* Fiber.join(cancel)).toEqual(["finished"])
      expect(Option.getOrThrow(yield* repo.get(id)).state).toBe("done")
    }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

  it.live("a cancel of running items notifies at commit, the ids in notices of at most 300; a rolled-back cancel sends none", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const ctx = yield* Layer.build(repoLayer(url))
      const repo = Context.get(ctx, QueueRepo.QueueRepo)
      const sql = Context.get(ctx, SqlClient.SqlClient)
      const notices = yield* Queue.unbounded<string>()
      const listener = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => listener.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => listener.end()))
      // The schema's own channel (docket_cancel in public).
      const channel = schemaOf(url).cancelChannel
      listener.on("notification", (m) => {
        if (m.channel === channel) Queue.unsafeOffer(notices, m.payload ?? "")
      })
      yield* Effect.promise(() => listener.query(`LISTEN ${listener.escapeIdentifier(channel)}`))
      const take = Queue.take(notices).pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "no notice" }))
      yield* repo.enqueueMany(Array.from({ length: 650 }, (_, i) => ({ kind: "job", payload: i })))
      const claims = yield* repo.claim({ worker: "w", limit: 650, lease: 30_000 })
      const ids = claims.map((c) => c.id)
      const waiting = yield* repo.enqueue("job", "waiting")
      // Rolled back: nothing is sent (the next notice is the committed cancel's).
      yield* Effect.either(sql.withTransaction(Effect.zipRight(repo.cancel([ids[0]]), Effect.fail("undo"))))
      expect(yield* repo.cancel([ids[1], waiting.id])).toEqual(["cancelledRunning", "cancelled"])
      expect(yield* take).toBe(String(ids[1]))
      // Many at once: notices of at most 300 ids (a payload stays under 8000 bytes).
      const rest = ids.filter((id) => id !== ids[1])
      const outcomes = yield* repo.cancel(rest)
      expect(new Set(outcomes)).toEqual(new Set(["cancelledRunning"]))
      const got: Array<string> = [yield* take, yield* take, yield* take]
      const sizes = got.map((p) => p.split(",").length).sort((a, b) => b - a)
      expect(sizes).toEqual([300, 300, 49])
      expect(got.flatMap((p) => p.split(",").map(Number)).sort((a, b) => a - b)).toEqual(rest)
      // Only running items are announced: cancelling waiting ones sends nothing.
      const more = yield* repo.enqueue("job", "more")
      expect(yield* repo.cancel([more.id])).toEqual(["cancelled"])
      yield* repo.enqueue("job", "last")
      const [last] = yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })
      expect(yield* repo.cancel([last.id])).toEqual(["cancelledRunning"])
      expect(yield* take).toBe(String(last.id))
    }).pipe(Effect.scoped, Effect.timeout("30 seconds")))
}
