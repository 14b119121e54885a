/**
 * Durable workflows on Effect's own API (@effect/workflow): Docket as the
 * `WorkflowEngine`, on the SQLite file or the PostgreSQL database the queue
 * already uses. Workflows are written with `Workflow.make`, `Activity.make`,
 * `DurableClock.sleep`, `DurableDeferred` and `Workflow.withCompensation` as
 * for any engine; their executions run in Docket's worker pools, on any
 * process that registered them, and survive restarts and crashes.
 * docs/workflows.md maps each engine operation to what Docket stores.
 *
 * A module of its own (`docket/Workflows`): applications that do not use
 * workflows load nothing of it, nor @effect/workflow (an optional peer).
 *
 * @example
 * ```ts
 * const Signup = Workflow.make({ name: "Signup", payload: { email: Schema.String }, idempotencyKey: (p) => p.email })
 * const SignupLive = Signup.toLayer(({ email }) => Activity.make({ name: "mail", execute: sendWelcome(email) }))
 *
 * const Live = Workflows.layer({ database: "./app.db", handlers: [], workflows: SignupLive })
 * const program = Signup.execute({ email: "a@example.com" }) // waits for the result, from any process
 * ```
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as SqlClientTag from "@effect/sql/SqlClient"
import { WorkflowEngine } from "@effect/workflow/WorkflowEngine"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Database from "./Database.js"
import * as Docket from "./Docket.js"
import type { InvalidInput, InvalidSchedule, MigrationFailed } from "./Errors.js"
import type * as Handler from "./Handler.js"
import * as Db from "./internal/sql/db.js"
import type * as Admin from "./internal/workflow/admin.js"
import * as ControlOps from "./internal/workflow/control.js"
import * as Engine from "./internal/workflow/engine.js"
import { handlers } from "./internal/workflow/runner.js"
import * as WorkflowSql from "./internal/workflow/sql.js"
import * as Batch from "./internal/workflow/batch.js"
import * as Prune from "./internal/workflow/prune.js"
import * as Service from "./internal/workflow/service.js"
import * as Steps from "./internal/workflow/steps.js"
import * as Waiters from "./internal/workflow/waiters.js"
import * as QueueRepo from "./QueueRepo.js"
import type * as Wakeups from "./Wakeups.js"
import * as Worker from "./Worker.js"

/** `deferredDone` (a `DurableDeferred.done`) for an execution that does not exist: a defect naming it; nothing is written. */
export const ExecutionNotFound = Engine.ExecutionNotFound
/** The kind a workflow's runs are items of (`workflow:` and its name), as `docket stats` and the dashboard show them. */
export const kindOf: (workflowName: string) => string = Engine.kindOf
/** The kind of the durable clocks' items (`DurableClock.sleep` longer than its in-memory threshold). */
export const CLOCK_KIND: string = Engine.CLOCK_KIND

// The engine's parts, in context beside it: the pool built after the
// workflows' layer takes its handlers from them.
class Parts extends Context.Tag("docket/Workflows/Parts")<Parts, {
  readonly deps: Engine.Deps
  readonly engine: WorkflowEngine["Type"]
  readonly db: Db.Db
}>() {}

/**
 * Operating workflows by execution id, without their code (what `docket
 * workflow` and the dashboard do): `list` (newest first, by state and
 * workflow, paged), `show` (activities, deferreds, clocks, children),
 * `interrupt`, `resume`, and `completeDeferred` by a deferred's token.
 */
export type Control = Admin.Admin

/** The operations over the queue in context. */
export const control: Effect.Effect<Control, never, QueueRepo.QueueRepo | SqlClient.SqlClient> = ControlOps.control

/** An execution as `Control.list` gives it, and with everything stored about it (`Control.show`). */
export type { Execution, ExecutionDetail } from "./internal/workflow/admin.js"

/** The engine over the queue in context (its database, its `QueueRepo`). */
const engineLayer: Layer.Layer<WorkflowEngine | Parts, never, QueueRepo.QueueRepo | SqlClient.SqlClient> = Layer
  .scopedContext(
    Effect.gen(function*() {
      const db = yield* Db.make(yield* SqlClientTag.SqlClient)
      const sql = WorkflowSql.make(db)
      const scope = yield* Effect.scope
      const deps: Engine.Deps = {
        sql,
        transaction: db.transaction,
        repo: yield* QueueRepo.QueueRepo,
        waiters: yield* Waiters.make(scope, sql.completed),
        registry: new Map(),
        runs: new Map(),
        putStep: Steps.make(sql.activityPut, scope),
        batched: Batch.make(db.transaction, scope),
        startRun: Batch.reader(sql.start, scope),
        scope
      }
      const engine = Service.make(deps)
      return Context.make(WorkflowEngine, engine).pipe(Context.add(Parts, { deps, engine, db }))
    })
  )

/** `layer`'s options: `Docket.layer`'s, and the workflows' layer. */
export interface LayerOptions<H extends Handler.Any, E, R> extends Docket.LayerOptions<H> {
  /**
   * The workflows this process runs: `Workflow.toLayer` layers (merged with
   * `Layer.mergeAll`). Built after the engine and before the pool, which
   * then runs their kinds; a workflow registered by a layer built later is
   * not run by this pool.
   */
  readonly workflows: Layer.Layer<never, E, R>
  /**
   * How long a complete execution is kept (default 7 days; "forever" keeps
   * every one). Until then a second `execute` of its id answers its result;
   * after, it runs the workflow again. The pool deletes older ones with their
   * steps every 5 minutes; a child is kept while its parent is unfinished.
   */
  readonly executionRetention?: Duration.DurationInput | "forever" | undefined
}

/**
 * The engine (`WorkflowEngine`), the queue and a worker pool that runs the
 * given handlers and the workflows of `options.workflows`: one layer, as
 * `Docket.layer`. Releasing it shuts the pool down gracefully (a run cut
 * short is replayed by the next run from its stored steps).
 */
export const layer = <H extends Handler.Any, E = never, R = never>(
  options: LayerOptions<H, E, R>
): Layer.Layer<
  WorkflowEngine | Worker.Worker | QueueRepo.QueueRepo | Wakeups.Wakeups | SqlClient.SqlClient,
  Database.DatabaseUnavailable | MigrationFailed | InvalidInput | InvalidSchedule | E,
  Handler.Requirements<H> | Exclude<R, WorkflowEngine>
> => {
  const retention = options.executionRetention ?? Prune.DEFAULT_EXECUTION_RETENTION
  const pool = Layer.unwrapEffect(
    Effect.map(Parts, ({ db, deps, engine }) =>
      Layer.merge(
        Worker.layer<Handler.Any>({ ...options, handlers: [...options.handlers, ...handlers(deps, engine)] }),
        retention === "forever"
          ? Layer.empty
          : Layer.scopedDiscard(Effect.flatMap(Effect.scope, (scope) => Prune.start(db, Duration.decode(retention), scope)))
      ))
  ) as Layer.Layer<Worker.Worker, InvalidSchedule | InvalidInput, Parts | Handler.Requirements<H>>
  return pool.pipe(
    Layer.provide(options.workflows),
    Layer.provideMerge(engineLayer),
    Layer.provideMerge(Docket.layerStore(options))
  ) as Layer.Layer<
    WorkflowEngine | Worker.Worker | QueueRepo.QueueRepo | Wakeups.Wakeups | SqlClient.SqlClient,
    Database.DatabaseUnavailable | MigrationFailed | InvalidInput | InvalidSchedule | E,
    Handler.Requirements<H> | Exclude<R, WorkflowEngine>
  >
}

/**
 * The engine and the queue without a pool: for processes that start
 * workflows, wait for their results, complete their deferreds, interrupt or
 * resume them, while the pools of other processes run them.
 */
export const layerClient = (
  database: string | Database.Target,
  options: { readonly databaseOptions?: Database.Options; readonly repo?: QueueRepo.Options } = {}
): Layer.Layer<
  WorkflowEngine | QueueRepo.QueueRepo | Wakeups.Wakeups | SqlClient.SqlClient,
  Database.DatabaseUnavailable | MigrationFailed | InvalidInput
> => engineLayer.pipe(Layer.provideMerge(Docket.layerClient(database, options)))
