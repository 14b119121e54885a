/**
 * Transactions whose failed COMMIT is a typed failure. @effect/sql's
 * `withTransaction` dies (a defect) when its COMMIT or ROLLBACK fails. On a
 * full SQLite disk COMMIT fails with SQLITE_FULL (SQLite rolls the
 * transaction back itself), so a keyed enqueue, `failMany`, `releaseMany`,
 * `snoozeMany`, a cancel... died instead of failing with `StorageError`: a
 * caller could not tell it from a bug, and in a pool the defect ended the
 * fiber that made the call (a release in the claimer's sweep stopped its
 * claims). Here that SqlError is put back in the error channel, where the
 * callers map it to `StorageError` like any other statement's.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

const isSqlError = (defect: unknown): defect is SqlError =>
  typeof defect === "object" && defect !== null && "_tag" in defect && defect._tag === "SqlError"

/** `sql.withTransaction`, with a failed COMMIT or ROLLBACK as a failure (SqlError), not a defect. */
export const typed = (sql: SqlClient) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  sql.withTransaction(effect).pipe(
    Effect.catchSomeDefect((defect) => (isSqlError(defect) ? Option.some(Effect.fail(defect)) : Option.none()))
  )
