/**
 * The engine as a service: `WorkflowEngine.makeUnsafe` over the executions'
 * operations (here: execute, poll, interrupt, resume) and the steps'
 * (engine.ts: activities, deferreds, clocks). engine.ts says what each does.
 */
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { InvalidInput } from "../../Errors.js"
import * as Codec from "./codec.js"
import { type Deps, InterruptSignal, stepOps, steps, storage } from "./engine.js"
import { FALLBACK_MS } from "./waiters.js"

/** The operations on executions: start or join one, read, interrupt, resume. */
const executionOps = (deps: Deps): Pick<WorkflowEngine.Encoded, "execute" | "poll" | "interrupt" | "resume"> => {
  const { sql, transaction, waiters } = deps
  const { complete, enqueueRun, wake } = steps(deps)

  const resultOf = (workflow: Workflow.Any, executionId: string) =>
    Effect.flatMap(storage("read an execution", sql.get(executionId)), (row) =>
      row?.state === "complete" && row.result !== null
        ? Effect.map(Codec.decodeResult(workflow, row.result), Option.some)
        : Effect.succeed(Option.none()))

  // Waits for the stored result, pushed (waiters.ts), reading again at each push.
  const awaitResult = (workflow: Workflow.Any, executionId: string) =>
    Effect.scoped(Effect.gen(function*() {
      const ticket = yield* waiters.ticket(executionId)
      while (true) {
        const result = yield* resultOf(workflow, executionId)
        if (Option.isSome(result)) return result.value
        yield* ticket.wait(FALLBACK_MS)
      }
    }))

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
        yield* storage(
          "start an execution",
          transaction(Effect.flatMap(
            sql.insert({
              executionId,
              workflow: workflow.name,
              payload,
              parent: parent === undefined ? undefined : { workflow: parent.workflow.name, executionId: parent.executionId }
            }),
            (created) => created ? Effect.asVoid(enqueueRun(workflow.name, executionId)) : Effect.void
          ))
        )
        if (options.discard) return undefined
        if (parent !== undefined) {
          return Option.getOrElse(yield* resultOf(workflow, executionId), () => new Workflow.Suspended({}))
        }
        return yield* awaitResult(workflow, executionId)
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

/** The engine's operations over `deps`. */
export const make = (deps: Deps): WorkflowEngine.WorkflowEngine["Type"] =>
  WorkflowEngine.makeUnsafe({
    register: (workflow, execute) =>
      Effect.acquireRelease(
        Effect.sync(() => deps.registry.set(workflow.name, { workflow, execute })),
        () => Effect.sync(() => deps.registry.delete(workflow.name))
      ),
    ...executionOps(deps),
    ...stepOps(deps)
  })
