/**
 * PostgreSQL only: dead retries racing each other.
 * Registered by test/store/pg.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { expect, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import * as RetryDead from "../../../src/internal/sql/deadRetry.js"
import { racing } from "../../support/pg.js"
import type { Backend } from "../../support/db.js"

/** Registers these tests for the PostgreSQL backend. */
export const pgDeadTests = (backend: Backend) => {
  it.live("two dead retries at once retry an item once and count its death once", () =>
    Effect.gen(function*() {
      const { query, repo, untilLockWait } = yield* racing(backend)
      const { id } = yield* repo.enqueue("twice", 1)
      const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: 30_000 })
      expect(yield* repo.fail(claim, "boom", { _tag: "Dead" })).toBe("dead")
      yield* query("BEGIN")
      expect((yield* query(RetryDead.pg, [[id], null])).rows.map((r) => Number(r.id))).toEqual([id])
      const second = yield* Effect.fork(repo.retryDead({ ids: [id] }))
      yield* untilLockWait
      yield* query("COMMIT")
      expect(yield* Fiber.join(second)).toEqual([])
      expect((yield* repo.totals).filter((t) => t.what === "dead")).toEqual([{ kind: "twice", what: "dead", count: 1 }])
      expect(Option.getOrThrow(yield* repo.get(id)).state).toBe("waiting")
    }).pipe(Effect.scoped, Effect.timeout("30 seconds")))
}
