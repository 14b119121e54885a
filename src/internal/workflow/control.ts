/**
 * `Workflows.control` on its own: the operations of admin.ts over the queue
 * in context, built without the engine, the pool or Workflows.ts (whose
 * imports load Worker.ts). The command (src/cli/commands/workflowRun.ts) and
 * the dashboard import this module only when a workflow is operated.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as QueueRepo from "../../QueueRepo.js"
import * as Db from "../sql/db.js"
import * as Admin from "./admin.js"
import * as WorkflowSql from "./sql.js"

/** The operations over the queue in context. */
export const control: Effect.Effect<Admin.Admin, never, QueueRepo.QueueRepo | SqlClient.SqlClient> = Effect.gen(
  function*() {
    const db = yield* Db.make(yield* SqlClient.SqlClient)
    return Admin.make({ sql: WorkflowSql.make(db), transaction: db.transaction, repo: yield* QueueRepo.QueueRepo }, db)
  }
)
