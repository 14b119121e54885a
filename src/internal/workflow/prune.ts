/**
 * The retention of finished executions: a complete execution older than the
 * retention is deleted with its activities' results, deferreds and clocks,
 * a batch at a time. Until then it answers a second `execute` of its id
 * with its result; after, an `execute` of that id runs the workflow again
 * (docs/workflows.md). A child is kept while its parent is unfinished, so a
 * parent's replay still finds its child's result.
 *
 * Every pool running workflows prunes (`Workflows.layer`): a pass soon after
 * it starts, then every `PRUNE_EVERY_MS`, repeated while batches come back
 * full. Two pools pruning at once do not take the same executions
 * (PostgreSQL: SKIP LOCKED; SQLite: one writer).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Now from "../sql/clock.js"
import type { Db } from "../sql/db.js"

/** Executions one statement deletes at most. */
export const PRUNE_BATCH = 1000

/** How often a pool prunes. */
export const PRUNE_EVERY_MS = 5 * 60_000

/** How long a complete execution is kept by default: a week. */
export const DEFAULT_EXECUTION_RETENTION = Duration.days(7)

const candidates = (now: string, age: string, limit: string, lock: string) => `
SELECT e.execution_id FROM docket_workflow_executions e
WHERE e.state = 'complete' AND e.updated_at < ${now} - ${age}
  AND (e.parent_execution IS NULL OR NOT EXISTS (
    SELECT 1 FROM docket_workflow_executions p WHERE p.execution_id = e.parent_execution AND p.state <> 'complete'))
ORDER BY e.updated_at, e.execution_id LIMIT ${limit}${lock}`

// $1 the age (ms), $2 the batch size: one statement for the four tables.
const prunePg = `WITH gone AS (
  DELETE FROM docket_workflow_executions WHERE execution_id IN (${candidates(Now.pg, "$1", "$2", " FOR UPDATE SKIP LOCKED")})
  RETURNING execution_id
), a AS (DELETE FROM docket_workflow_activities WHERE execution_id IN (SELECT execution_id FROM gone)),
d AS (DELETE FROM docket_workflow_deferreds WHERE execution_id IN (SELECT execution_id FROM gone)),
c AS (DELETE FROM docket_workflow_clocks WHERE execution_id IN (SELECT execution_id FROM gone))
SELECT count(*) AS n FROM gone`

// SQLite: a statement per table, the executions last, each selecting the same
// batch: the transaction holds the write lock from its first statement, and
// the steps' rows it deletes first do not change which executions are picked.
const deleteSqlite = (table: string) =>
  `DELETE FROM ${table} WHERE execution_id IN (${candidates(Now.sqlite, "?1", "?2", "")})`

/** Deletes one batch of complete executions older than `olderThanMs`: how many. */
export const pruneOnce = (db: Db, olderThanMs: number, limit = PRUNE_BATCH): Effect.Effect<number, SqlError> =>
  db.dialect === "pg"
    ? Effect.map(db.run<{ n: number | string }>(prunePg, [olderThanMs, limit]), (rows) => Number(rows[0]?.n ?? 0))
    : db.transaction(Effect.gen(function*() {
      for (const table of ["docket_workflow_activities", "docket_workflow_deferreds", "docket_workflow_clocks"]) {
        yield* db.run(deleteSqlite(table), [olderThanMs, limit])
      }
      const gone = yield* db.run(`${deleteSqlite("docket_workflow_executions")} RETURNING execution_id`, [olderThanMs, limit])
      return gone.length
    }))

/** Deletes every complete execution older than `olderThanMs` (batch by batch): how many. */
export const prune = (db: Db, olderThanMs: number): Effect.Effect<number, SqlError> =>
  Effect.gen(function*() {
    let total = 0
    for (;;) {
      const n = yield* pruneOnce(db, olderThanMs)
      total += n
      if (n < PRUNE_BATCH) return total
      yield* Effect.yieldNow()
    }
  })

/** The pool's pruning, in `scope`: a pass 10 s after the start, then every PRUNE_EVERY_MS; a failed pass is logged. */
export const start = (db: Db, retention: Duration.Duration, scope: Scope.Scope): Effect.Effect<void> =>
  Effect.asVoid(Effect.forkIn(
    Effect.sleep("10 seconds").pipe(
      Effect.zipRight(
        prune(db, Duration.toMillis(retention)).pipe(
          Effect.catchAll((error) => Effect.logWarning(`docket workflows: pruning finished executions failed: ${error.message}`)),
          Effect.zipRight(Effect.sleep(Duration.millis(PRUNE_EVERY_MS))),
          Effect.forever
        )
      )
    ),
    scope
  ))
