/**
 * The executions counted by workflow and state, and how long the oldest
 * suspended one of each workflow has waited (since its last change, by the
 * database's clock): what /metrics exposes. Plain SQL over the executions'
 * table (its index on state, workflow, updated_at), without @effect/workflow,
 * so the metrics of an application that does not install it still load.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "../sql/clock.js"
import { type Db, texts } from "../sql/db.js"
import type { ExecutionState } from "./sql.js"

/** A workflow's executions in one state; for suspended ones, the oldest's wait in ms. */
export interface StateCount {
  readonly workflow: string
  readonly state: ExecutionState
  readonly count: number
  /** Suspended: ms since the oldest one's last change; null for the other states. */
  readonly oldestMs: number | null
}

const text = (now: string) => `SELECT workflow, state, COUNT(*) AS n,
  CASE WHEN state = 'suspended' THEN ${now} - MIN(updated_at) END AS oldest_ms
FROM docket_workflow_executions GROUP BY state, workflow ORDER BY workflow, state`

interface Row {
  readonly workflow: string
  readonly state: ExecutionState
  readonly n: number | string
  readonly oldest_ms: number | string | null
}

/** The counts over `db`. */
export const counts = (db: Db): Effect.Effect<ReadonlyArray<StateCount>, SqlError> =>
  Effect.map(read(db)(), (rows) => rows.map(decode))

const read = texts(text(Now.pg), text(Now.sqlite), (run, t) => () => run<Row>(t, []))

const decode = (r: Row): StateCount => ({
    workflow: r.workflow,
    state: r.state,
    count: Number(r.n),
    oldestMs: r.oldest_ms === null ? null : Math.max(0, Number(r.oldest_ms))
})
