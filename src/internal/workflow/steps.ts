/**
 * The step writer: activities' results stored in batches. Each result must be
 * stored before its workflow goes on (a replay must find it), and each store
 * is a commit: on SQLite with `synchronous = FULL` and on PostgreSQL with
 * `synchronous_commit` on, a disk flush of some milliseconds, which made the
 * inserts most of a five-activity workflow's time. Results of runs finishing
 * at about the same time share one statement and one commit: the first
 * result is written at once, and those that arrive while it is written go
 * together in the next (batching without waiting, as the worker's outcomes
 * are recorded). Each caller still waits for its own result's commit.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { forkWriter } from "./batch.js"
import { type ActivityResult, activityKey } from "./sql.js"

/** Most results in one statement. */
const BATCH = 500

/** Stores one result: true if it was stored now, false if one was stored already. */
export type PutStep = (result: ActivityResult) => Effect.Effect<boolean, SqlError>

interface Request {
  readonly result: ActivityResult
  readonly done: Deferred.Deferred<boolean, SqlError>
}

/** The writer over `putMany` (sql.ts `activityPut`), its fiber in `scope`. */
export const make = (
  putMany: (results: ReadonlyArray<ActivityResult>) => Effect.Effect<ReadonlySet<string>, SqlError>,
  scope: Scope.Scope
): PutStep => {
  const pending: Array<Request> = []
  let writing = false
  const writeAll: Effect.Effect<void> = Effect.suspend(() => {
    const batch = pending.splice(0, BATCH)
    if (batch.length === 0) {
      writing = false
      return Effect.void
    }
    return Effect.exit(putMany(batch.map((r) => r.result))).pipe(
      Effect.flatMap((exit) =>
        Effect.forEach(batch, ({ done, result }) =>
          exit._tag === "Success"
            ? Deferred.succeed(done, exit.value.has(`${result.executionId} ${activityKey(result.name, result.attempt)}`))
            : Deferred.failCause(done, exit.cause), { discard: true })
      ),
      Effect.zipRight(writeAll)
    )
  })
  return (result) =>
    // The push and the fork together, not interrupted between them (batch.ts `make`).
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<boolean, SqlError>()
        pending.push({ result, done })
        if (!writing) {
          writing = true
          yield* forkWriter(writeAll, scope)
        }
        return yield* restore(Deferred.await(done))
      })
    )
}
