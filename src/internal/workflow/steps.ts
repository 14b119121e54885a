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
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { coalesce } from "./batch.js"
import { type ActivityResult, activityKey } from "./sql.js"

/** Most results in one statement. */
const BATCH = 500

/** Stores one result: true if it was stored now, false if one was stored already. */
export type PutStep = (result: ActivityResult) => Effect.Effect<boolean, SqlError>

/** The writer over `putMany` (sql.ts `activityPut`), its fiber in `scope` (batch.ts `coalesce`). */
export const make = (
  putMany: (results: ReadonlyArray<ActivityResult>) => Effect.Effect<ReadonlySet<string>, SqlError>,
  scope: Scope.Scope
): PutStep =>
  coalesce(
    (results: ReadonlyArray<ActivityResult>) =>
      Effect.map(putMany(results), (stored) =>
        results.map((r) => stored.has(`${r.executionId} ${activityKey(r.name, r.attempt)}`))),
    scope,
    BATCH
  )
