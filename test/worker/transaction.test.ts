/**
 * A transaction whose COMMIT fails is a typed failure (src/internal/transaction.ts),
 * not a defect as @effect/sql's withTransaction makes it. On a full SQLite disk
 * COMMIT fails with SQLITE_FULL (the disk-full reliability scenario); here a
 * deferred foreign key makes COMMIT fail on an ordinary file.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as Transaction from "../../src/internal/transaction.js"
import { cleanup, freshRepo } from "../support/worker.js"

afterAll(cleanup)

describe("typed transactions", () => {
  it.live("a failed COMMIT fails with SqlError in the error channel; @effect/sql's own dies", () =>
    Effect.scoped(Effect.gen(function*() {
      const { sql } = yield* freshRepo
      yield* sql.unsafe("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
      yield* sql.unsafe("CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
      // Checked at COMMIT: a child without its parent.
      const orphan = sql.unsafe("INSERT INTO child (id, parent) VALUES (1, 42)")
      // A COMMIT refused by a deferred constraint leaves the transaction open: end it.
      const rollback = Effect.ignore(sql.unsafe("ROLLBACK"))
      const raw = yield* Effect.exit(sql.withTransaction(orphan))
      yield* rollback
      expect(Exit.isFailure(raw) && Cause.isDie(raw.cause)).toBe(true)
      const typed = yield* Effect.exit(Transaction.typed(sql)(orphan))
      yield* rollback
      expect(Exit.isFailure(typed) && Cause.isFailType(typed.cause) && typed.cause.error._tag).toBe("SqlError")
      // Nothing was written, and the connection works.
      expect(yield* sql.unsafe<{ n: number }>("SELECT count(*) AS n FROM child")).toEqual([{ n: 0 }])
      expect(yield* Transaction.typed(sql)(sql.unsafe("INSERT INTO parent (id) VALUES (42)"))).toEqual([])
    })))
})
