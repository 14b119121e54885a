/**
 * The handlers that run workflows in Docket's worker pools: one per
 * registered workflow (its kind `workflow:<name>`, engine.ts `kindOf`), whose
 * items are runs of its executions, and the clock kind's.
 *
 * A run replays the execution from its start: finished activities and
 * completed deferreds are read back, not run again, so the run goes as far
 * as it can and then finishes (the result stored, waiters and the parent
 * woken) or suspends (the execution marked suspended; the item is done, and
 * what it waits for enqueues the next run). Runs of one execution share its
 * id as their dedupe key: a waiting run is not claimed while another holds a
 * live lease, so two never overlap across processes (a per-execution group
 * would say the same, through the grouped claim, which takes a group at a
 * time: measured, it held a workflow kind to a few runs per claim). A crash
 * leaves the run's item to its lease, and the next run replays from the
 * stored steps.
 *
 * Clocks are fired by runs (engine.ts, `scheduleClock`): a run that starts at
 * or after a clock's due time stores the clock's deferred before it replays
 * (batched with other runs' firings: batch.ts), and a run that suspends
 * waiting on clocks leaves the next run due at the earliest of them, in the
 * suspend's transaction. So a firing is one item, not two (a clock's item,
 * then the run it wakes), which is what bounded how many clocks one worker
 * fires a second (docs/benchmarks.md, "Many asleep at once").
 */
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Handler from "../../Handler.js"
import { Permanent, Retry } from "../../Outcome.js"
import * as Codec from "./codec.js"
import type { Stored } from "./sql.js"
import {
  CLOCK_KIND,
  type Deps,
  type Entry,
  ExecutionNotFound,
  InterruptSignal,
  kindOf,
  type Run,
  steps,
  WorkflowStorageFailure
} from "./engine.js"

const RunPayload = Schema.Struct({ executionId: Schema.String })
const ClockPayload = Schema.Struct({ workflow: Schema.String, executionId: Schema.String, deferred: Schema.String })

/** Attempts of a run's item: a run fails only when storage does (a workflow's own failure is its result). */
const RUN_ATTEMPTS = 1000

const retryable = <A, E>(what: string, effect: Effect.Effect<A, E>) =>
  Effect.mapError(effect, (error) => new Retry({ reason: `${what}: ${error instanceof Error ? error.message : String(error)}` }))

const storageFailure = (result: Workflow.Result<unknown, unknown>): WorkflowStorageFailure | undefined => {
  if (result._tag !== "Complete" || Exit.isSuccess(result.exit)) return undefined
  for (const defect of Cause.defects(result.exit.cause)) if (defect instanceof WorkflowStorageFailure) return defect
  return undefined
}

/** A run's clocks: those due fired as it starts, and its next run due at the earliest it waits on. */
const runClocks = (deps: Deps) => {
  const { sql } = deps
  const { enqueueRun } = steps(deps)
  // The clocks due when the run started and not fired: their deferreds stored (the first
  // stored wins: an item of the clock kind of an earlier version may have raced), and a
  // suspended execution marked running, batched with other runs' firings (batch.ts).
  const fire = (executionId: string, stored: Stored) =>
    Effect.gen(function*() {
      const due = [...stored.clocks].filter(([name, clock]) => clock.due && !stored.deferreds.has(name)).map(([name]) => name)
      if (due.length === 0) return
      const exit = yield* Codec.encodeExit(Exit.void)
      const exits = yield* deps.batched(Effect.gen(function*() {
        const kept: Array<string | undefined> = []
        for (const name of due) {
          kept.push((yield* sql.deferredPut(executionId, name, exit)) ? exit : yield* sql.deferredGet(executionId, name))
        }
        yield* sql.running(executionId)
        return kept
      }))
      due.forEach((name, i) => {
        stored.clocks.delete(name)
        if (exits[i] !== undefined) stored.deferreds.set(name, exits[i])
      })
    })

  // A run waiting on clocks not fired leaves the next run due at the earliest, with its suspend
  // (the suspend first: it takes the execution's row, as a wake-up's transaction does first).
  const suspend = (workflow: string, executionId: string, wakes: number, waits: ReadonlyMap<string, number>) =>
    waits.size === 0
      ? sql.suspend(executionId, wakes)
      : deps.batched(Effect.zipRight(
        sql.suspend(executionId, wakes),
        enqueueRun(workflow, executionId, Math.min(...waits.values()))
      ))
  return { fire, suspend }
}

/** Runs one execution as far as it goes (see the module doc). */
export const runExecution = (deps: Deps, engine: WorkflowEngine.WorkflowEngine["Type"]) => {
  const { registry, sql, waiters } = deps
  const { enqueueRun } = steps(deps)
  const { fire, suspend } = runClocks(deps)
  const signalled = (executionId: string) =>
    Effect.map(Effect.orDie(sql.deferredGet(executionId, InterruptSignal.name)), (exit) => exit !== undefined)

  // As Effect's engines: a run that suspends after an interrupt was asked for
  // interrupts itself instead, so the workflow's compensations run.
  const replay = (entry: Entry, payload: object, executionId: string, interrupted: boolean) => {
    const instance = WorkflowEngine.WorkflowInstance.initial(entry.workflow, executionId)
    instance.interrupted = interrupted
    return entry.execute(payload, executionId).pipe(
      Effect.onExit(() =>
        !instance.suspended ? Effect.void : Effect.flatMap(signalled(executionId), (signal) => {
          if (!signal && !instance.interrupted) return Effect.void
          instance.suspended = false
          instance.interrupted = true
          return Effect.withFiberRuntime<void>((fiber) => Effect.interruptible(Fiber.interrupt(fiber)))
        })
      ),
      Workflow.intoResult,
      Effect.provideService(WorkflowEngine.WorkflowInstance, instance),
      Effect.provideService(WorkflowEngine.WorkflowEngine, engine)
    )
  }

  // Batched with other runs' ends (batch.ts): one commit for the runs ending together; an
  // execution without a parent ends in one statement. Whether this run's result is the one
  // stored (a run that raced it may have stored first).
  const finish = (executionId: string, text: string, hasParent: boolean) =>
    deps.batched(
      Effect.gen(function*() {
        const { parent, stored } = yield* sql.complete(executionId, text)
        if (!stored || parent === null) return stored
        const woken = yield* sql.wake(parent)
        if (woken !== undefined) yield* enqueueRun(woken, parent)
        return stored
      }),
      { single: !hasParent }
    )

  return (executionId: string): Effect.Effect<void, Retry | Permanent> =>
    Effect.gen(function*() {
      // Read, not written: a write here would cost a commit per run (runs are counted as they end).
      // The execution and its stored steps in one statement, shared with runs starting at about the same time.
      const started = yield* retryable("start a run", deps.startRun(executionId))
      if (started === undefined) return yield* new Permanent({ reason: `no execution ${executionId}` })
      const { row, stored } = started
      if (row.state === "complete") return
      const entry = registry.get(row.workflow)
      if (entry === undefined) {
        return yield* new Retry({ reason: `workflow ${row.workflow} is not registered in this process` })
      }
      const payload = yield* Codec.decodePayload(entry.workflow, row.payload).pipe(
        Effect.mapError((error) =>
          new Permanent({ reason: `the payload of execution ${executionId} does not decode: ${error.message}` })
        )
      )
      yield* retryable("fire a clock", fire(executionId, stored))
      const interrupted = stored.deferreds.has(InterruptSignal.name)
      const run: Run = { ...stored, waits: new Map() }
      deps.runs.set(executionId, run)
      const result = yield* Effect.ensuring(
        replay(entry, payload as object, executionId, interrupted),
        Effect.sync(() => deps.runs.delete(executionId))
      )
      const failure = storageFailure(result)
      if (failure !== undefined) return yield* new Retry({ reason: failure.reason })
      if (result._tag === "Complete") {
        const text = yield* Codec.encodeResult(entry.workflow, result)
        // The callers waiting in this process take the result as stored, without reading it back.
        yield* retryable(
          "store the result",
          waiters.completing(
            executionId,
            Effect.map(finish(executionId, text, row.parent_execution !== null), (stored) => (stored ? text : undefined))
          )
        )
      } else {
        yield* retryable("suspend", suspend(row.workflow, executionId, row.wakes, run.waits))
      }
    })
}

/** The handlers of the registered workflows' kinds and of the clock kind (for its items of earlier versions). */
export const handlers = (
  deps: Deps,
  engine: WorkflowEngine.WorkflowEngine["Type"]
): ReadonlyArray<Handler.Any> => {
  const run = runExecution(deps, engine)
  const { complete } = steps(deps)
  const runs = [...deps.registry.values()].map((entry) =>
    Handler.make(kindOf(entry.workflow.name), {
      payload: RunPayload,
      run: ({ executionId }) => run(executionId),
      maxAttempts: RUN_ATTEMPTS
    })
  )
  const clock = Handler.make(CLOCK_KIND, {
    payload: ClockPayload,
    run: ({ deferred, executionId, workflow }) =>
      Effect.flatMap(Codec.encodeExit(Exit.void), (exit) =>
        // Batched with other clocks firing together (batch.ts).
        complete(workflow, executionId, deferred, exit, false, deps.batched)).pipe(
        // An execution deleted while its clock waited: nothing to wake.
        Effect.catchSomeDefect((defect) =>
          defect instanceof ExecutionNotFound ? Option.some(Effect.void) : Option.none()
        )
      ),
    maxAttempts: RUN_ATTEMPTS
  })
  return [...runs, clock]
}
