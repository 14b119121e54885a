/**
 * The workflow engine's statements (migrations/pg/0018_workflows.sql): the
 * executions, their activities' results and their deferreds. Each is one
 * constant text per dialect with positional parameters, run through the
 * storage's `Db` (so on PostgreSQL they name the schema's objects and
 * channel). The engine (engine.ts) composes them; a run's item is enqueued
 * through the `QueueRepo` in the same transaction where it must be.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "../sql/clock.js"
import type { Db, Run } from "../sql/db.js"
import { WORKFLOW_CHANNEL } from "../sql/notify.js"

/** An execution's state: a run waiting or running, waiting for a wake-up, or finished. */
export type ExecutionState = "running" | "suspended" | "complete"

/** An execution as stored. */
export interface ExecutionRow {
  readonly execution_id: string
  readonly workflow: string
  readonly payload: string
  readonly state: ExecutionState
  readonly result: string | null
  readonly parent_workflow: string | null
  readonly parent_execution: string | null
  readonly wakes: number
  readonly runs: number
  readonly created_at: number | string
  readonly updated_at: number | string
  readonly completed_at: number | string | null
}

/** An execution's columns, as `ExecutionRow` has them. */
export const COLUMNS = "execution_id, workflow, payload, state, result, parent_workflow, parent_execution, wakes, runs, " +
  "created_at, updated_at, completed_at"

// $1 id, $2 workflow, $3 payload, $4 parent workflow, $5 parent execution.
const insertPg = `INSERT INTO docket_workflow_executions
  (execution_id, workflow, payload, state, parent_workflow, parent_execution, created_at, updated_at)
VALUES ($1, $2, $3, 'running', $4, $5, ${Now.pg}, ${Now.pg})
ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`
const insertSqlite = `INSERT INTO docket_workflow_executions
  (execution_id, workflow, payload, state, parent_workflow, parent_execution, created_at, updated_at)
VALUES (?1, ?2, ?3, 'running', ?4, ?5, ${Now.sqlite}, ${Now.sqlite})
ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`

// Many at once: parallel arrays (PostgreSQL), a JSON array of [id, workflow, payload, parent workflow,
// parent execution] (SQLite). An id twice in one statement is added once.
const insertManyPg = `INSERT INTO docket_workflow_executions
  (execution_id, workflow, payload, state, parent_workflow, parent_execution, created_at, updated_at)
SELECT u.id, u.workflow, u.payload, 'running', u.pw, u.pe, ${Now.pg}, ${Now.pg}
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS u(id, workflow, payload, pw, pe)
ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`
const insertManySqlite = `INSERT INTO docket_workflow_executions
  (execution_id, workflow, payload, state, parent_workflow, parent_execution, created_at, updated_at)
SELECT value ->> 0, value ->> 1, value ->> 2, 'running', value ->> 3, value ->> 4, ${Now.sqlite}, ${Now.sqlite}
FROM json_each(?1) WHERE true
ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`

const getPg = `SELECT ${COLUMNS} FROM docket_workflow_executions WHERE execution_id = $1`
const getSqlite = `SELECT ${COLUMNS} FROM docket_workflow_executions WHERE execution_id = ?1`

// The result, once (the run counted); its parent to wake. PostgreSQL notifies the waiters at commit.
const completePg = `WITH done AS (
  UPDATE docket_workflow_executions
  SET state = 'complete', result = $2, runs = runs + 1, completed_at = ${Now.pg}, updated_at = ${Now.pg}
  WHERE execution_id = $1 AND state <> 'complete'
  RETURNING parent_workflow, parent_execution
)
SELECT parent_workflow, parent_execution, pg_notify('${WORKFLOW_CHANNEL}', $1) AS notified FROM done`
const completeSqlite = `UPDATE docket_workflow_executions
SET state = 'complete', result = ?2, runs = runs + 1, completed_at = ${Now.sqlite}, updated_at = ${Now.sqlite}
WHERE execution_id = ?1 AND state <> 'complete'
RETURNING parent_workflow, parent_execution`

// Suspended only if no wake-up came since the run started ($2 the wakes it read); the run counted either way.
const suspendPg = `UPDATE docket_workflow_executions SET state = CASE WHEN wakes = $2 THEN 'suspended' ELSE state END,
  runs = runs + 1, updated_at = ${Now.pg}
WHERE execution_id = $1 AND state = 'running'`
const suspendSqlite = `UPDATE docket_workflow_executions SET state = CASE WHEN wakes = ?2 THEN 'suspended' ELSE state END,
  runs = runs + 1, updated_at = ${Now.sqlite}
WHERE execution_id = ?1 AND state = 'running'`

const wakePg = `UPDATE docket_workflow_executions SET state = 'running', wakes = wakes + 1, updated_at = ${Now.pg}
WHERE execution_id = $1 AND state <> 'complete' RETURNING workflow`
const wakeSqlite = `UPDATE docket_workflow_executions SET state = 'running', wakes = wakes + 1, updated_at = ${Now.sqlite}
WHERE execution_id = ?1 AND state <> 'complete' RETURNING workflow`

// A clock scheduled once per execution and name: its due time, the one stored before if it was
// ($3 the delay, ms). The update on a conflict changes nothing; it is there for RETURNING.
const clockPg = `INSERT INTO docket_workflow_clocks (execution_id, name, due_at, created_at)
VALUES ($1, $2, ${Now.pg} + $3, ${Now.pg})
ON CONFLICT (execution_id, name) DO UPDATE SET due_at = docket_workflow_clocks.due_at RETURNING due_at`
const clockSqlite = `INSERT INTO docket_workflow_clocks (execution_id, name, due_at, created_at)
VALUES (?1, ?2, ${Now.sqlite} + ?3, ${Now.sqlite})
ON CONFLICT (execution_id, name) DO UPDATE SET due_at = docket_workflow_clocks.due_at RETURNING due_at`

// A suspended execution whose run started at a clock's due time is running again (its wakes kept:
// the run's own suspend compares them).
const runningPg = `UPDATE docket_workflow_executions SET state = 'running', updated_at = ${Now.pg}
WHERE execution_id = $1 AND state = 'suspended'`
const runningSqlite = `UPDATE docket_workflow_executions SET state = 'running', updated_at = ${Now.sqlite}
WHERE execution_id = ?1 AND state = 'suspended'`

// Which of these executions are complete ($1 an array; ?1 a JSON array).
const completedPg = `SELECT execution_id FROM docket_workflow_executions
WHERE execution_id = ANY($1::text[]) AND state = 'complete'`
const completedSqlite = `SELECT execution_id FROM docket_workflow_executions
WHERE execution_id IN (SELECT value FROM json_each(?1)) AND state = 'complete'`

const activityGetPg = `SELECT result FROM docket_workflow_activities WHERE execution_id = $1 AND name = $2 AND attempt = $3`
const activityGetSqlite =
  `SELECT result FROM docket_workflow_activities WHERE execution_id = ?1 AND name = ?2 AND attempt = ?3`
// Many results in one statement (the step writer's batch: steps.ts); those stored now are returned.
const activityPutPg = `INSERT INTO docket_workflow_activities (execution_id, name, attempt, result, created_at)
SELECT e, n, a, r, ${Now.pg} FROM unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS u(e, n, a, r)
ON CONFLICT DO NOTHING RETURNING execution_id, name, attempt`
const activityPutSqlite = `INSERT INTO docket_workflow_activities (execution_id, name, attempt, result, created_at)
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, ${Now.sqlite} FROM json_each(?1) WHERE true
ON CONFLICT DO NOTHING RETURNING execution_id, name, attempt`

// Runs' starts in one read: each execution and what it replays from (activities' results as
// [name, attempt, result], deferreds as [name, exit]) and its clocks not fired (as [name, due_at,
// whether due now]), JSON arrays.
const startPg = `SELECT ${COLUMNS.replaceAll(/(\w+)/g, "e.$1")},
  coalesce((SELECT json_agg(json_build_array(a.name, a.attempt, a.result)) FROM docket_workflow_activities a
    WHERE a.execution_id = e.execution_id), '[]')::text AS activities,
  coalesce((SELECT json_agg(json_build_array(d.name, d.exit)) FROM docket_workflow_deferreds d
    WHERE d.execution_id = e.execution_id), '[]')::text AS deferreds,
  coalesce((SELECT json_agg(json_build_array(c.name, c.due_at, c.due_at <= ${Now.pg})) FROM docket_workflow_clocks c
    WHERE c.execution_id = e.execution_id AND NOT EXISTS (SELECT 1 FROM docket_workflow_deferreds d
      WHERE d.execution_id = c.execution_id AND d.name = c.name)), '[]')::text AS clocks
FROM docket_workflow_executions e WHERE e.execution_id = ANY($1::text[])`
const startSqlite = `SELECT ${COLUMNS.replaceAll(/(\w+)/g, "e.$1")},
  (SELECT json_group_array(json_array(a.name, a.attempt, a.result)) FROM docket_workflow_activities a
    WHERE a.execution_id = e.execution_id) AS activities,
  (SELECT json_group_array(json_array(d.name, d.exit)) FROM docket_workflow_deferreds d
    WHERE d.execution_id = e.execution_id) AS deferreds,
  (SELECT json_group_array(json_array(c.name, c.due_at, c.due_at <= ${Now.sqlite})) FROM docket_workflow_clocks c
    WHERE c.execution_id = e.execution_id AND NOT EXISTS (SELECT 1 FROM docket_workflow_deferreds d
      WHERE d.execution_id = c.execution_id AND d.name = c.name)) AS clocks
FROM docket_workflow_executions e WHERE e.execution_id IN (SELECT value FROM json_each(?1))`

const deferredGetPg = `SELECT exit FROM docket_workflow_deferreds WHERE execution_id = $1 AND name = $2`
const deferredGetSqlite = `SELECT exit FROM docket_workflow_deferreds WHERE execution_id = ?1 AND name = ?2`
// Only for an execution that exists; the first completion wins.
const deferredPutPg = `INSERT INTO docket_workflow_deferreds (execution_id, name, exit, created_at)
SELECT $1, $2, $3, ${Now.pg} WHERE EXISTS (SELECT 1 FROM docket_workflow_executions WHERE execution_id = $1)
ON CONFLICT DO NOTHING RETURNING name`
const deferredPutSqlite = `INSERT INTO docket_workflow_deferreds (execution_id, name, exit, created_at)
SELECT ?1, ?2, ?3, ${Now.sqlite} WHERE EXISTS (SELECT 1 FROM docket_workflow_executions WHERE execution_id = ?1)
ON CONFLICT DO NOTHING RETURNING name`

/** The statements over one `Db`. */
export interface WorkflowSql {
  /** Adds the execution unless it exists: true if added. */
  readonly insert: (row: {
    readonly executionId: string
    readonly workflow: string
    readonly payload: string
    readonly parent: { readonly workflow: string; readonly executionId: string } | undefined
  }) => Effect.Effect<boolean, SqlError>
  /** Adds those of the executions that do not exist, in one statement: the ids added. */
  readonly insertMany: (rows: ReadonlyArray<NewExecution>) => Effect.Effect<ReadonlySet<string>, SqlError>
  readonly get: (executionId: string) => Effect.Effect<ExecutionRow | undefined, SqlError>
  /** Stores the result (once): the parent to wake, if it was stored now. */
  readonly complete: (
    executionId: string,
    result: string
  ) => Effect.Effect<{ readonly stored: boolean; readonly parent: string | null }, SqlError>
  readonly suspend: (executionId: string, wakes: number) => Effect.Effect<void, SqlError>
  /** Marks an unfinished execution running again: its workflow's name, or undefined (none, or finished). */
  readonly wake: (executionId: string) => Effect.Effect<string | undefined, SqlError>
  /** Schedules a clock unless it was: its due time (epoch ms, the database's clock), the first one's if it was. */
  readonly clock: (executionId: string, name: string, delayMs: number) => Effect.Effect<number, SqlError>
  /** Marks a suspended execution running (a run started at a clock's due time), its wakes kept. */
  readonly running: (executionId: string) => Effect.Effect<void, SqlError>
  /** Those of `executionIds` that are complete. */
  readonly completed: (executionIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, SqlError>
  readonly activityGet: (executionId: string, name: string, attempt: number) => Effect.Effect<string | undefined, SqlError>
  /** Stores attempts' results, each unless one is stored: the keys (`activityKey`, by execution) of those stored now. */
  readonly activityPut: (rows: ReadonlyArray<ActivityResult>) => Effect.Effect<ReadonlySet<string>, SqlError>
  /** Runs' starts: each execution found and what it replays from, in one read (an id not in the map: no such execution). */
  readonly start: (executionIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, Started>, SqlError>
  readonly deferredGet: (executionId: string, name: string) => Effect.Effect<string | undefined, SqlError>
  /** Stores a deferred's exit unless one is stored or the execution does not exist: true if stored now. */
  readonly deferredPut: (executionId: string, name: string, exit: string) => Effect.Effect<boolean, SqlError>
}

/**
 * An execution's stored steps: activities' results by `name/attempt`,
 * deferreds' exits by name, and its clocks not fired, by name (their
 * deferreds are not stored): due times, and whether due when read.
 */
export interface Stored {
  readonly activities: Map<string, string>
  readonly deferreds: Map<string, string>
  readonly clocks: Map<string, { readonly dueAt: number; readonly due: boolean }>
}

/** A run's start: its execution, and what it replays from. */
export interface Started {
  readonly row: ExecutionRow
  readonly stored: Stored
}

/** An execution to add. */
export interface NewExecution {
  readonly executionId: string
  readonly workflow: string
  readonly payload: string
  readonly parent: { readonly workflow: string; readonly executionId: string } | undefined
}

/** An attempt's result, to store. */
export interface ActivityResult {
  readonly executionId: string
  readonly name: string
  readonly attempt: number
  readonly result: string
}

/** The key of an activity's attempt in `Stored.activities`. */
export const activityKey = (name: string, attempt: number) => `${attempt}/${name}`

const first = <A>(rows: ReadonlyArray<A>): A | undefined => rows[0]

type Texts = Record<keyof WorkflowSql, string>

const bind = (
  run: Run,
  t: Texts,
  arrayParam: (ids: ReadonlyArray<string>) => unknown,
  resultsParams: (rows: ReadonlyArray<ActivityResult>) => ReadonlyArray<unknown>,
  executionsParams: (rows: ReadonlyArray<NewExecution>) => ReadonlyArray<unknown>
): WorkflowSql => ({
  insertMany: (rows) =>
    Effect.map(run<{ execution_id: string }>(t.insertMany, executionsParams(rows)), (added) =>
      new Set(added.map((r) => r.execution_id))),
  clock: (id, name, delayMs) =>
    Effect.map(run<{ due_at: number | string }>(t.clock, [id, name, delayMs]), (rows) => Number(rows[0]!.due_at)),
  running: (id) => Effect.asVoid(run(t.running, [id])),
  completed: (ids) =>
    Effect.map(run<{ execution_id: string }>(t.completed, [arrayParam(ids)]), (rows) => rows.map((r) => r.execution_id)),
  insert: ({ executionId, parent, payload, workflow }) =>
    Effect.map(
      run(t.insert, [executionId, workflow, payload, parent?.workflow ?? null, parent?.executionId ?? null]),
      (rows) => rows.length > 0
    ),
  get: (id) => Effect.map(run<ExecutionRow>(t.get, [id]), first),
  complete: (id, result) =>
    Effect.map(run<{ parent_execution: string | null }>(t.complete, [id, result]), (rows) => ({
      stored: rows.length > 0,
      parent: rows[0]?.parent_execution ?? null
    })),
  suspend: (id, wakes) => Effect.asVoid(run(t.suspend, [id, wakes])),
  wake: (id) => Effect.map(run<{ workflow: string }>(t.wake, [id]), (rows) => rows[0]?.workflow),
  activityGet: (id, name, attempt) =>
    Effect.map(run<{ result: string }>(t.activityGet, [id, name, attempt]), (rows) => rows[0]?.result),
  activityPut: (results) =>
    Effect.map(
      run<{ execution_id: string; name: string; attempt: number }>(t.activityPut, resultsParams(results)),
      (rows) => new Set(rows.map((r) => `${r.execution_id} ${activityKey(r.name, Number(r.attempt))}`))
    ),
  start: (ids) =>
    Effect.map(run<ExecutionRow & { activities: string; deferreds: string; clocks: string }>(t.start, [arrayParam(ids)]), (rows) => {
      const started = new Map<string, Started>()
      for (const { activities, clocks, deferreds, ...row } of rows) {
        const stored: Stored = { activities: new Map(), deferreds: new Map(), clocks: new Map() }
        for (const [name, attempt, result] of JSON.parse(activities) as Array<[string, number, string]>) {
          stored.activities.set(activityKey(name, Number(attempt)), result)
        }
        for (const [name, exit] of JSON.parse(deferreds) as Array<[string, string]>) stored.deferreds.set(name, exit)
        // PostgreSQL gives the comparison as true/false, SQLite as 1/0.
        for (const [name, dueAt, due] of JSON.parse(clocks) as Array<[string, number | string, boolean | number]>) {
          stored.clocks.set(name, { dueAt: Number(dueAt), due: due === true || due === 1 })
        }
        started.set(row.execution_id, { row, stored })
      }
      return started
    }),
  deferredGet: (id, name) => Effect.map(run<{ exit: string }>(t.deferredGet, [id, name]), (rows) => rows[0]?.exit),
  deferredPut: (id, name, exit) => Effect.map(run(t.deferredPut, [id, name, exit]), (rows) => rows.length > 0)
})

const pgTexts: Texts = {
  insert: insertPg,
  insertMany: insertManyPg,
  get: getPg,
  complete: completePg,
  suspend: suspendPg,
  wake: wakePg,
  activityGet: activityGetPg,
  activityPut: activityPutPg,
  start: startPg,
  deferredGet: deferredGetPg,
  deferredPut: deferredPutPg,
  completed: completedPg,
  clock: clockPg,
  running: runningPg
}

const sqliteTexts: Texts = {
  insert: insertSqlite,
  insertMany: insertManySqlite,
  get: getSqlite,
  complete: completeSqlite,
  suspend: suspendSqlite,
  wake: wakeSqlite,
  activityGet: activityGetSqlite,
  activityPut: activityPutSqlite,
  start: startSqlite,
  deferredGet: deferredGetSqlite,
  deferredPut: deferredPutSqlite,
  completed: completedSqlite,
  clock: clockSqlite,
  running: runningSqlite
}

/** The statements for a dialect. */
export const make = (db: Db): WorkflowSql =>
  db.dialect === "pg"
    ? bind(db.run, pgTexts, (ids) => ids, (rows) => [
      rows.map((r) => r.executionId),
      rows.map((r) => r.name),
      rows.map((r) => r.attempt),
      rows.map((r) => r.result)
    ], (rows) => [
      rows.map((r) => r.executionId),
      rows.map((r) => r.workflow),
      rows.map((r) => r.payload),
      rows.map((r) => r.parent?.workflow ?? null),
      rows.map((r) => r.parent?.executionId ?? null)
    ])
    : bind(db.run, sqliteTexts, (ids) => JSON.stringify(ids), (rows) => [
      JSON.stringify(rows.map((r) => [r.executionId, r.name, r.attempt, r.result]))
    ], (rows) => [
      JSON.stringify(rows.map((r) => [r.executionId, r.workflow, r.payload, r.parent?.workflow ?? null, r.parent?.executionId ?? null]))
    ])
