/**
 * Operating workflows without their code: what the command, the dashboard
 * and `Workflows.list` / `show` / `interrupt` / `resume` / `completeDeferred`
 * read and do, by execution id (a person has an id, not a `Workflow` value).
 * Interrupt, resume and a deferred's completion are the engine's own steps
 * (engine.ts); what is stored stays encoded JSON, shown as it is.
 */
import { SqlError as SqlErrorClass, type SqlError } from "@effect/sql/SqlError"
import { TokenParsed } from "@effect/workflow/DurableDeferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import { InvalidInput, type StorageError } from "../../Errors.js"
import { storage } from "../store/decode.js"
import { type Db, type Run, texts } from "../sql/db.js"
import * as Codec from "./codec.js"
import * as Prune from "./prune.js"
import { type Deps, ExecutionNotFound, InterruptSignal, steps } from "./engine.js"
import { COLUMNS, type ExecutionRow, type ExecutionState } from "./sql.js"

/** An execution as listed. */
export interface Execution {
  readonly executionId: string
  readonly workflow: string
  readonly state: ExecutionState
  readonly runs: number
  readonly parent: string | null
  readonly createdAt: number
  readonly updatedAt: number
  readonly completedAt: number | null
}

/** An execution with everything stored about it. */
export interface ExecutionDetail extends Execution {
  readonly payload: unknown
  /** The stored Result (`{ _tag: "Complete", exit }`, encoded), once complete. */
  readonly result: unknown
  readonly activities: ReadonlyArray<{ readonly name: string; readonly attempt: number; readonly result: unknown; readonly at: number }>
  readonly deferreds: ReadonlyArray<{ readonly name: string; readonly exit: unknown; readonly at: number }>
  /** Durable clocks not yet fired: their names and due times. */
  readonly clocks: ReadonlyArray<{ readonly name: string; readonly dueAt: number }>
  readonly children: ReadonlyArray<Execution>
}

const num = (value: number | string | null): number => Number(value)

const toExecution = (row: ExecutionRow): Execution => ({
  executionId: row.execution_id,
  workflow: row.workflow,
  state: row.state,
  runs: num(row.runs),
  parent: row.parent_execution,
  createdAt: num(row.created_at),
  updatedAt: num(row.updated_at),
  completedAt: row.completed_at === null ? null : num(row.completed_at)
})

// Newest first; $1 state or NULL, $2 workflow or NULL, $3 page size, $4 updated_at before, $5 id before (the page's last).
const listPg = `SELECT ${COLUMNS} FROM docket_workflow_executions
WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR workflow = $2)
  AND ($4::bigint IS NULL OR (updated_at, execution_id) < ($4, $5::text))
ORDER BY updated_at DESC, execution_id DESC LIMIT $3`
const listSqlite = `SELECT ${COLUMNS} FROM docket_workflow_executions
WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR workflow = ?2)
  AND (?4 IS NULL OR updated_at < ?4 OR (updated_at = ?4 AND execution_id < ?5))
ORDER BY updated_at DESC, execution_id DESC LIMIT ?3`
const childrenPg = `SELECT ${COLUMNS} FROM docket_workflow_executions WHERE parent_execution = $1 ORDER BY created_at, execution_id`
const childrenSqlite = `SELECT ${COLUMNS} FROM docket_workflow_executions WHERE parent_execution = ?1 ORDER BY created_at, execution_id`
const activitiesPg = `SELECT name, attempt, result, created_at FROM docket_workflow_activities WHERE execution_id = $1
ORDER BY created_at, name, attempt`
const activitiesSqlite = `SELECT name, attempt, result, created_at FROM docket_workflow_activities WHERE execution_id = ?1
ORDER BY created_at, name, attempt`
const deferredsPg = `SELECT name, exit, created_at FROM docket_workflow_deferreds WHERE execution_id = $1 ORDER BY created_at, name`
const deferredsSqlite = `SELECT name, exit, created_at FROM docket_workflow_deferreds WHERE execution_id = ?1 ORDER BY created_at, name`
// Clocks not fired yet: scheduled, and their deferred not completed.
const clocksPg = `SELECT c.name, c.due_at FROM docket_workflow_clocks c WHERE c.execution_id = $1
  AND NOT EXISTS (SELECT 1 FROM docket_workflow_deferreds d WHERE d.execution_id = c.execution_id AND d.name = c.name)
ORDER BY c.due_at`
const clocksSqlite = `SELECT c.name, c.due_at FROM docket_workflow_clocks c WHERE c.execution_id = ?1
  AND NOT EXISTS (SELECT 1 FROM docket_workflow_deferreds d WHERE d.execution_id = c.execution_id AND d.name = c.name)
ORDER BY c.due_at`

interface Reads {
  readonly list: string
  readonly children: string
  readonly activities: string
  readonly deferreds: string
  readonly clocks: string
}

const reads = texts<Reads, (run: Run) => Reads & { readonly run: Run }>(
  { list: listPg, children: childrenPg, activities: activitiesPg, deferreds: deferredsPg, clocks: clocksPg },
  {
    list: listSqlite,
    children: childrenSqlite,
    activities: activitiesSqlite,
    deferreds: deferredsSqlite,
    clocks: clocksSqlite
  },
  (run, t) => () => ({ ...t, run })
)

const parseJson = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

// A storage failure, typed as the repository's are (store/decode.ts).
const typed = <A, E>(effect: Effect.Effect<A, E | SqlError>) =>
  Effect.catchIf(effect, (e): e is SqlError => e instanceof SqlErrorClass, (error) => Effect.fail(storage("workflows")(error)))

/** An execution with everything stored about it, read by `t` (found by `found`). */
const showWith = (
  t: Reads & { readonly run: Run },
  found: (executionId: string) => Effect.Effect<ExecutionRow, ExecutionNotFound | StorageError>
) =>
(executionId: string) =>
  Effect.gen(function*() {
    const row = yield* found(executionId)
    const [children, activities, deferreds, clocks] = yield* typed(Effect.all([
      t.run<ExecutionRow>(t.children, [executionId]),
      t.run<{ name: string; attempt: number; result: string; created_at: number | string }>(t.activities, [executionId]),
      t.run<{ name: string; exit: string; created_at: number | string }>(t.deferreds, [executionId]),
      t.run<{ name: string; due_at: number | string }>(t.clocks, [executionId])
    ]))
    const detail: ExecutionDetail = {
      ...toExecution(row),
      payload: parseJson(row.payload),
      result: parseJson(row.result),
      activities: activities.map((a) => ({ name: a.name, attempt: num(a.attempt), result: parseJson(a.result), at: num(a.created_at) })),
      deferreds: deferreds.map((d) => ({ name: d.name, exit: parseJson(d.exit), at: num(d.created_at) })),
      clocks: clocks.map((c) => ({ name: c.name.replace(/^DurableClock\//, ""), dueAt: num(c.due_at) })),
      children: children.map(toExecution)
    }
    return detail
  })

/** The operations, over the engine's storage and the storage's runner. */
export const make = (deps: Pick<Deps, "repo" | "sql" | "transaction">, db: Db) => {
  const t = reads(db)(db.run)
  const { complete, wake } = steps(deps)
  const found = (executionId: string) =>
    Effect.flatMap(typed(deps.sql.get(executionId)), (row) =>
      row === undefined ? Effect.fail(new ExecutionNotFound({ workflow: "(any)", executionId })) : Effect.succeed(row))

  const list = (options: {
    readonly state?: ExecutionState | undefined
    readonly workflow?: string | undefined
    readonly limit?: number | undefined
    readonly before?: { readonly updatedAt: number; readonly executionId: string } | undefined
  } = {}) =>
    typed(Effect.map(
      t.run<ExecutionRow>(t.list, [
        options.state ?? null,
        options.workflow ?? null,
        options.limit ?? 50,
        options.before?.updatedAt ?? null,
        options.before?.executionId ?? null
      ]),
      (rows) => rows.map(toExecution)
    ))

  /** Interrupts an unfinished execution (its compensations run); false if it had finished. */
  const interrupt = (executionId: string) =>
    Effect.flatMap(found(executionId), (row) =>
      row.state === "complete" ? Effect.succeed(false) : Effect.as(
        Effect.flatMap(Codec.encodeExit(Exit.void), (exit) =>
          complete(row.workflow, executionId, InterruptSignal.name, exit, false)),
        true
      ))

  /** Resumes a suspended execution (another run); false if it was not suspended. */
  const resume = (executionId: string) =>
    Effect.flatMap(found(executionId), (row) =>
      row.state === "suspended" ? Effect.as(wake(executionId), true) : Effect.succeed(false))

  /**
   * Completes a deferred by its token (`DurableDeferred.token`) with a
   * success value (its encoded, JSON form) or a failure: the first
   * completion wins. A token that does not parse is `InvalidInput`; one for
   * no execution `ExecutionNotFound`; nothing is written then.
   */
  const completeDeferred = (token: string, outcome: { readonly success: unknown } | { readonly failure: unknown }) =>
    Effect.gen(function*() {
      const parsed = Schema.decodeEither(TokenParsed.FromString)(token)
      if (Either.isLeft(parsed)) {
        return yield* new InvalidInput({ field: "token", reason: "is not a deferred's token (DurableDeferred.token)" })
      }
      const { deferredName, executionId, workflowName } = parsed.right
      const row = yield* typed(deps.sql.get(executionId))
      if (row === undefined) return yield* new ExecutionNotFound({ workflow: workflowName, executionId })
      const exit = yield* Codec.encodeExit("success" in outcome ? Exit.succeed(outcome.success) : Exit.fail(outcome.failure))
      yield* complete(workflowName, executionId, deferredName, exit, false)
    })

  /** Deletes the complete executions older than `olderThan` (with their steps; a child is kept while its parent is unfinished): how many. */
  const prune = (olderThan: Duration.DurationInput) => typed(Prune.prune(db, Duration.toMillis(olderThan)))

  return { list, show: showWith(t, found), interrupt, resume, completeDeferred, prune }
}

/** The operations' service type. */
export type Admin = ReturnType<typeof make>
