/**
 * The engine as a service: `WorkflowEngine.makeUnsafe` over the executions'
 * operations (here: execute, poll, interrupt, resume) and the steps'
 * (engine.ts: activities, deferreds, clocks). engine.ts says what each does.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Activity from "@effect/workflow/Activity"
import type * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { InvalidInput } from "../../Errors.js"
import { defaultTracer } from "../tracing.js"
import * as Batch from "./batch.js"
import * as Codec from "./codec.js"
import * as Exits from "./exits.js"
import { type Deps, InterruptSignal, startSteps, stepOps, steps, storage } from "./engine.js"
import type { NewExecution } from "./sql.js"
import { FALLBACK_MS, type Ticket } from "./waiters.js"

/** Starting an execution, and reading or waiting for its result. */
const starting = (deps: Deps) => {
  const { sql, transaction } = deps
  const { enqueueFirstRun, startMany } = startSteps(deps)
  // Executions started outside a transaction of the caller's: many in one transaction, two statements.
  const starts = Batch.coalesce((rows: ReadonlyArray<NewExecution>) => transaction(startMany(rows)), deps.scope)

  const resultOf = (workflow: Workflow.Any, executionId: string) =>
    Effect.flatMap(storage("read an execution", sql.get(executionId)), (row) =>
      row?.state === "complete" && row.result !== null
        ? Effect.map(Codec.decodeResult(workflow, row.result), Option.some)
        : Effect.succeed(Option.none()))

  // Waits for the stored result, pushed (waiters.ts), with the ticket taken before the execution
  // was started or joined (so no completion is missed). A push from this process brings the
  // result as stored; one from another process is read. An execution this call created cannot
  // have finished before its first push: it is not read first.
  const awaitResult = (workflow: Workflow.Any, executionId: string, ticket: Ticket, created: boolean) =>
    Effect.gen(function*() {
      let read = !created
      while (true) {
        if (read) {
          const result = yield* resultOf(workflow, executionId)
          if (Option.isSome(result)) return result.value
        }
        const pushed = yield* ticket.wait(FALLBACK_MS)
        if (pushed !== undefined) return yield* Codec.decodeResult(workflow, pushed)
        read = true
      }
    })

  // An execution's row and its first run's item. In the caller's transaction if it has one (the
  // execution starts when it commits); else with other executions started at about the same
  // time, in one transaction of two statements (batch.ts `coalesce`). The first run's item is
  // inserted without the replace's look-up: a waiting run of an execution just created is left by
  // none but an execution of the same id deleted, and that one is replaced as a wake-up would.
  const start = (
    workflow: Workflow.Any,
    executionId: string,
    payload: string,
    parent: WorkflowEngine.WorkflowInstance["Type"] | undefined
  ) =>
    Effect.gen(function*() {
      const tx = yield* Effect.serviceOption(SqlClient.TransactionConnection)
      const row: NewExecution = {
        executionId,
        workflow: workflow.name,
        payload,
        parent: parent === undefined ? undefined : { workflow: parent.workflow.name, executionId: parent.executionId }
      }
      // Under an application's tracer a start goes on its own, in the caller's fiber: its run's
      // item stores the caller's trace context (a shared start would store the batch's).
      const alone = Option.isSome(tx) || (yield* Effect.tracer) !== defaultTracer
      return yield* storage(
        "start an execution",
        alone
          ? transaction(Effect.flatMap(sql.insert(row), (created) =>
            created ? Effect.as(enqueueFirstRun(workflow.name, executionId), true) : Effect.succeed(false)))
          : starts(row)
      )
    })

  return { resultOf, awaitResult, start }
}

/** The operations on executions: start or join one, read, interrupt, resume. */
const executionOps = (deps: Deps): Pick<WorkflowEngine.Encoded, "execute" | "poll" | "interrupt" | "resume"> => {
  const { sql, waiters } = deps
  const { complete, wake } = steps(deps)
  const { awaitResult, resultOf, start } = starting(deps)
  return {
    execute: <const Discard extends boolean>(
      workflow: Workflow.Any,
      options: {
        readonly executionId: string
        readonly payload: object
        readonly discard: Discard
        readonly parent?: WorkflowEngine.WorkflowInstance["Type"] | undefined
      }
    ) =>
      Effect.gen(function*() {
        const { executionId, parent } = options
        const payload = yield* Codec.encodePayload(workflow, options.payload).pipe(
          Effect.catchAll((error) =>
            Effect.die(new InvalidInput({ field: "payload", reason: `does not match workflow ${workflow.name}: ${error.message}` }))
          )
        )
        if (options.discard) {
          yield* start(workflow, executionId, payload, parent)
          return undefined
        }
        if (parent !== undefined) {
          // A child does not wait: its parent is woken when it finishes.
          const created = yield* start(workflow, executionId, payload, parent)
          if (created) return new Workflow.Suspended({})
          return Option.getOrElse(yield* resultOf(workflow, executionId), () => new Workflow.Suspended({}))
        }
        // Inside the application's transaction the execution starts when it commits: waiting there
        // for its result would wait for ever (and on SQLite hold the one connection meanwhile).
        if (Option.isSome(yield* Effect.serviceOption(SqlClient.TransactionConnection))) {
          return yield* Effect.die(
            new InvalidInput({
              field: "discard",
              reason: `an execute of ${workflow.name} inside a transaction must not wait for its result: ` +
                "the execution starts when the transaction commits (give discard: true, and wait after the commit)"
            })
          )
        }
        return yield* Effect.scoped(Effect.gen(function*() {
          const ticket = yield* waiters.ticket(executionId)
          const created = yield* start(workflow, executionId, payload, parent)
          return yield* awaitResult(workflow, executionId, ticket, created)
        }))
      }) as Effect.Effect<Discard extends true ? void : Workflow.Result<unknown, unknown>>,
    poll: (workflow, executionId) =>
      Effect.flatMap(storage("poll", sql.get(executionId)), (row) => {
        if (row === undefined || row.state === "running") return Effect.succeed(undefined)
        if (row.state === "suspended") return Effect.succeed(new Workflow.Suspended({}))
        return row.result === null ? Effect.succeed(undefined) : Codec.decodeResult(workflow, row.result)
      }),
    interrupt: (workflow, executionId) =>
      Effect.flatMap(storage("interrupt", sql.get(executionId)), (row) =>
        row === undefined || row.state === "complete"
          ? Effect.void
          : Effect.flatMap(Codec.encodeExit(Exit.void), (exit) =>
            complete(workflow.name, executionId, InterruptSignal.name, exit, false))),
    resume: (_workflow, executionId) =>
      Effect.flatMap(storage("resume", sql.get(executionId)), (row) =>
        row?.state === "suspended" ? wake(executionId) : Effect.void)
  }
}

/**
 * The engine's operations over `deps`: Effect's `makeUnsafe` over them, with
 * its decoding of activities' results and deferreds' exits done as it does
 * it, but with a schema kept per pair of success and error schemas
 * (exits.ts says why).
 */
export const make = (deps: Deps): WorkflowEngine.WorkflowEngine["Type"] => {
  const steps = stepOps(deps)
  const engine = WorkflowEngine.makeUnsafe({
    register: (workflow, execute) =>
      Effect.acquireRelease(
        Effect.sync(() => deps.registry.set(workflow.name, { workflow, execute })),
        () => Effect.sync(() => deps.registry.delete(workflow.name))
      ),
    ...executionOps(deps),
    ...steps
  })
  type Service = WorkflowEngine.WorkflowEngine["Type"]
  const activityExecute = (activity: Activity.Any, attempt: number) =>
    Effect.flatMap(steps.activityExecute(activity, attempt), (result): Effect.Effect<Workflow.Result<unknown, unknown>> =>
      result._tag === "Suspended"
        ? Effect.succeed(result)
        : Effect.map(Exits.decodeExit(activity, result.exit), (exit) => new Workflow.Complete({ exit })))
  const deferredResult = (deferred: DurableDeferred.Any) =>
    Effect.gen(function*() {
      const instance = yield* WorkflowEngine.WorkflowInstance
      yield* Effect.annotateCurrentSpan({ executionId: instance.executionId })
      const exit = yield* steps.deferredResult(deferred)
      return exit === undefined ? exit : yield* Exits.decodeExit(deferred, exit)
    })
  return WorkflowEngine.WorkflowEngine.of({
    ...engine,
    // The service's generic signatures over the same values (makeUnsafe's own erase them alike).
    activityExecute: activityExecute as unknown as Service["activityExecute"],
    deferredResult: deferredResult as unknown as Service["deferredResult"]
  })
}
