/**
 * The engine's operations (`WorkflowEngine.Encoded`, which Effect's
 * `makeUnsafe` turns into the `WorkflowEngine` service), durably, with the
 * meaning Effect's in-memory engine gives each:
 * - `execute`: the execution's row and its first run's item in one
 *   transaction (the caller's if it has one, else one shared with other
 *   starts: batch.ts), once per execution id (a second `execute` joins: it
 *   waits for the same result); the caller waits for the stored result,
 *   pushed (waiters.ts), handed over with the push when this process stored it. A child (called from a parent's run) does not wait: it is
 *   `Suspended` until it finishes, and its finishing wakes the parent.
 * - `activityExecute`: an attempt's stored result if there is one (never run
 *   twice once finished), else the activity runs and its result is stored
 *   (the first stored wins: two runs that raced agree on it).
 * - `deferredResult` / `deferredDone`: the deferred's row; completing it
 *   wakes the execution (another run's item), unless the run completing it
 *   is that execution's own.
 * - `scheduleClock`: the clock's row, with its due time (once per execution
 *   and name). A run that suspends waiting on clocks not fired leaves the
 *   execution's next run due at the earliest of them (runner.ts): held by no
 *   process while it waits. A run that starts at or after a clock's due time
 *   completes the clock's deferred first. So a firing is one item, the
 *   execution's own run. A wake-up before then brings that run forward (a
 *   wake replaces the waiting run's due time with now); the run it starts
 *   finds the clock not due, and suspending again leaves the next run due at
 *   it. Items of the clock kind (`CLOCK_KIND`, enqueued by earlier
 *   versions) still fire: their handler completes the clock's deferred and
 *   wakes the execution.
 * - `interrupt`: the interrupt signal (a deferred) and a wake-up; the run
 *   that finds it at a suspension interrupts itself, so compensations run.
 * - `resume`: a wake-up of a suspended execution.
 * A storage failure inside an operation is retried three times and then is
 * a `WorkflowStorageFailure` defect; the run that meets one (runner.ts)
 * stores nothing and is retried as an item, instead of completing the
 * workflow with the defect.
 *
 * This module holds what the operations share (their dependencies, the
 * storage steps, kinds and errors) and the steps' operations; the
 * executions' operations and the service are in service.ts.
 */
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as QueueRepo from "../../QueueRepo.js"
import type { Unit } from "../sql/db.js"
import * as Codec from "./codec.js"
import { activityKey, type NewExecution, type Started, type Stored, type WorkflowSql } from "./sql.js"
import type { Batched, Read } from "./batch.js"
import type { PutStep } from "./steps.js"
import type { Waiters } from "./waiters.js"

/** A run in progress in this process: its stored steps, and the clocks it waits on. */
export interface Run extends Stored {
  /**
   * The clocks not fired that this run reached (`scheduleClock`), by name:
   * their due times. A run that suspends is due again at the earliest.
   */
  readonly waits: Map<string, number>
}

/**
 * The kind of a clock's item, as earlier versions enqueued them (one per
 * clock): its run completes the clock's deferred and wakes the execution.
 * Clocks are now fired by the execution's own runs; the kind's handler is
 * kept for the items a database made by an earlier release still holds.
 */
export const CLOCK_KIND = "docket.workflow.clock"

/** The deferred `interrupt` completes (the name Effect's cluster engine gives its own). */
export const InterruptSignal = DurableDeferred.make("Workflow/InterruptSignal")

/** A storage failure inside an engine operation (after its retries): the run stores nothing and is retried. */
export class WorkflowStorageFailure extends Data.TaggedError("WorkflowStorageFailure")<{ readonly reason: string }> {}

/** `deferredDone` (or a deferred's token) for an execution that does not exist: nothing is written. */
export class ExecutionNotFound extends Data.TaggedError("ExecutionNotFound")<{
  readonly workflow: string
  readonly executionId: string
}> {
  override get message() {
    return `no execution ${this.executionId} of workflow ${this.workflow}`
  }
}

/** A workflow's kind: `workflow:` and its name (runs of its executions are items of it). */
export const kindOf = (name: string): string => {
  // Within a kind's 128 characters ("workflow:" and the name; a kept part, "-" and 8 digits).
  const plain = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/.test(name) && name.length <= 119
  if (plain) return `workflow:${name}`
  // A name a kind cannot hold: its letters that can, and a digest that keeps it unique.
  let hash = 0x811c9dc5
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193) >>> 0
  const kept = name.replace(/[^A-Za-z0-9_.:-]/g, "_").slice(0, 110)
  return `workflow:${kept}-${hash.toString(16).padStart(8, "0")}`
}

/** A registered workflow: what `Workflow.toLayer` gave the engine. */
export interface Entry {
  readonly workflow: Workflow.Any
  readonly execute: (
    payload: object,
    executionId: string
  ) => Effect.Effect<unknown, unknown, WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine>
}

/** What the engine runs on. */
export interface Deps {
  readonly sql: WorkflowSql
  readonly transaction: Unit
  readonly repo: QueueRepo.Service
  readonly waiters: Waiters
  /** The workflows registered in this process, by name. */
  readonly registry: Map<string, Entry>
  /**
   * The stored steps of the executions running in this process (read once
   * as each run starts: runner.ts), so a replay reads no row per step and a
   * first run's activity costs one statement (its result's insert). A
   * deferred not found here is read from the database (it may have come
   * since the run started).
   */
  readonly runs: Map<string, Run>
  /** Stores an activity's result (batched with others': steps.ts). */
  readonly putStep: PutStep
  /** Runs a small transaction together with others asked for at about the same time (batch.ts). */
  readonly batched: Batched
  /** A run's start (its execution and stored steps), read together with others' starts asked for at about the same time (batch.ts). */
  readonly startRun: Read<string, Started>
  /** The engine's scope: its writers' fibers run in it. */
  readonly scope: Scope.Scope
}

/** A storage step of an operation: retried three times, then a `WorkflowStorageFailure` defect. */
export const storage = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, never, R> =>
  effect.pipe(
    Effect.retry({ times: 3, schedule: Schedule.exponential("100 millis") }),
    Effect.catchAll((error) =>
      Effect.die(new WorkflowStorageFailure({ reason: `${what}: ${error instanceof Error ? error.message : String(error)}` }))
    )
  )

/** The engine's storage steps, shared by the operations, the runs and the control (admin.ts). */
export const steps = (deps: Pick<Deps, "repo" | "sql" | "transaction">) => {
  const { repo, sql, transaction } = deps
  // Keyed by the execution: a wake-up while a run waits adds nothing, and one
  // while a run runs waits until that run's lease ends (docs/concepts.md, "Dedupe
  // keys"), so two runs of an execution never overlap.
  //
  // Without `dueAt` (a start, a wake-up) the run is due now, and a run already
  // waiting is brought forward to now ("replace": it may be one due at a
  // clock's time). With `dueAt` (a run suspending on clocks) a run already
  // waiting is kept: it is due earlier (a wake-up's, or the first run's).
  const enqueueRun = (workflow: string, executionId: string, dueAt?: number) =>
    repo.enqueue(
      kindOf(workflow),
      { executionId },
      dueAt === undefined ? { key: executionId, onConflict: "replace" } : { key: executionId, runAt: dueAt }
    )
  /** Wakes an unfinished execution: another run's item (coalesced with one waiting). */
  const wake = (executionId: string) =>
    storage(
      "wake",
      transaction(Effect.flatMap(sql.wake(executionId), (workflow) =>
        workflow === undefined ? Effect.void : Effect.asVoid(enqueueRun(workflow, executionId))))
    )
  /**
   * Completes a deferred of an execution that exists (the first wins) and
   * wakes it unless `self`; in the caller's transaction (if any), or in
   * `unit` (a batch of the engine's own: a clock's firing).
   */
  const complete = (
    workflow: string,
    executionId: string,
    name: string,
    exit: string,
    self: boolean,
    unit: Batched = transaction
  ) =>
    storage(
      "complete a deferred",
      unit(Effect.gen(function*() {
        // The write first: on SQLite the transaction holds the write lock from
        // its first statement (a read first could fail to upgrade: db.ts).
        if (!(yield* sql.deferredPut(executionId, name, exit))) {
          // Completed before (the first wins; its completion woke the execution), or no such execution.
          return (yield* sql.get(executionId)) !== undefined
        }
        if (!self) {
          const woken = yield* sql.wake(executionId)
          if (woken !== undefined) yield* enqueueRun(woken, executionId)
        }
        return true
      }))
    ).pipe(Effect.flatMap((found) => found ? Effect.void : Effect.die(new ExecutionNotFound({ workflow, executionId }))))
  return { enqueueRun, wake, complete }
}

/** The storage steps of an execution's start (service.ts `execute`). */
export const startSteps = (deps: Pick<Deps, "repo" | "sql" | "transaction">) => {
  const { repo, sql } = deps
  const { enqueueRun } = steps(deps)
  /**
   * The first run of an execution just created: inserted as "keep" (one
   * statement, where "replace" looks for a waiting run first); if a run of
   * the id waits all the same (left by an execution of that id deleted), it
   * is brought forward as a wake-up's is.
   */
  const enqueueFirstRun = (workflow: string, executionId: string) =>
    Effect.flatMap(
      repo.enqueue(kindOf(workflow), { executionId }, { key: executionId }),
      (result) => result._tag === "Deduplicated" ? Effect.asVoid(enqueueRun(workflow, executionId)) : Effect.void
    )
  /**
   * Starts executions (those whose ids do not exist) with their first runs'
   * items, in the caller's transaction: two statements for them all, and a
   * replace for a first run that found a run of its id waiting (as
   * `enqueueFirstRun`). Whether each request created its execution (an id
   * asked for twice: the first).
   */
  const startMany = (asked: ReadonlyArray<NewExecution>) =>
    Effect.gen(function*() {
      // In the ids' order: two processes starting the same ids wait on each other's keys in one
      // order, not in crossed orders (a deadlock on PostgreSQL).
      const order = asked.map((_, i) => i).sort((a, b) =>
        asked[a].executionId < asked[b].executionId ? -1 : asked[a].executionId > asked[b].executionId ? 1 : a - b)
      const rows = order.map((i) => asked[i])
      const added = yield* sql.insertMany(rows)
      const creators = new Set<number>()
      const seen = new Set<string>()
      rows.forEach((row, i) => {
        if (added.has(row.executionId) && !seen.has(row.executionId)) creators.add(i)
        seen.add(row.executionId)
      })
      const firsts = rows.filter((_, i) => creators.has(i))
      if (firsts.length > 0) {
        const results = yield* repo.enqueueMany(
          firsts.map((row) => ({ kind: kindOf(row.workflow), payload: { executionId: row.executionId }, key: row.executionId }))
        )
        for (let i = 0; i < firsts.length; i++) {
          if (results[i]._tag === "Deduplicated") yield* enqueueRun(firsts[i].workflow, firsts[i].executionId)
        }
      }
      const created: Array<boolean> = new Array(asked.length)
      order.forEach((i, sorted) => (created[i] = creators.has(sorted)))
      return created
    })
  return { enqueueFirstRun, startMany }
}

/** The operations on an execution's steps: activities, deferreds, clocks (run inside its runs). */
export const stepOps = (deps: Deps): Pick<
  WorkflowEngine.Encoded,
  "activityExecute" | "deferredResult" | "deferredDone" | "scheduleClock"
> => {
  const { sql, transaction } = deps
  const { complete, enqueueRun } = steps(deps)
  return {
    activityExecute: (activity, attempt) =>
      Effect.gen(function*() {
        const instance = yield* WorkflowEngine.WorkflowInstance
        const id = instance.executionId
        const key = activityKey(activity.name, attempt)
        const run = deps.runs.get(id)
        const stored = run !== undefined
          ? run.activities.get(key)
          : yield* storage("read an activity", sql.activityGet(id, activity.name, attempt))
        if (stored !== undefined) return yield* Codec.decodeActivity(stored)
        const activityInstance = WorkflowEngine.WorkflowInstance.initial(instance.workflow, id)
        activityInstance.interrupted = instance.interrupted
        const result = yield* activity.executeEncoded.pipe(
          Workflow.intoResult,
          Effect.provideService(WorkflowEngine.WorkflowInstance, activityInstance)
        ) as Effect.Effect<Workflow.Result<unknown, unknown>>
        if (!Codec.isComplete(result)) return result
        const text = yield* Codec.encodeActivity(result)
        if (yield* storage("store an activity", deps.putStep({ executionId: id, name: activity.name, attempt, result: text }))) {
          run?.activities.set(key, text)
          return result
        }
        // A run that raced this one stored first: its result is the one.
        const kept = yield* storage("read an activity", sql.activityGet(id, activity.name, attempt))
        if (kept === undefined) return result
        run?.activities.set(key, kept)
        return yield* Codec.decodeActivity(kept)
      }),
    deferredResult: (deferred) =>
      Effect.gen(function*() {
        const instance = yield* WorkflowEngine.WorkflowInstance
        const run = deps.runs.get(instance.executionId)
        const cached = run?.deferreds.get(deferred.name)
        const text = cached ?? (yield* storage("read a deferred", sql.deferredGet(instance.executionId, deferred.name)))
        if (text === undefined) return undefined
        run?.deferreds.set(deferred.name, text)
        return yield* Codec.decodeExit(text)
      }),
    deferredDone: (options) =>
      Effect.gen(function*() {
        const exit = yield* Codec.encodeExit(options.exit)
        const current = yield* Effect.serviceOption(WorkflowEngine.WorkflowInstance)
        const self = Option.isSome(current) && current.value.executionId === options.executionId
        yield* complete(options.workflowName, options.executionId, options.deferredName, exit, self)
      }),
    scheduleClock: (workflow, options) =>
      Effect.gen(function*() {
        const { clock, executionId } = options
        const name = clock.deferred.name
        const run = deps.runs.get(executionId)
        if (run?.deferreds.has(name)) return
        // Once per execution and clock: a replay reaching the same sleep writes nothing.
        const known = run?.clocks.get(name)?.dueAt
        if (run !== undefined && known !== undefined) {
          run.waits.set(name, known)
          return
        }
        // In a run, one statement batched with other runs' clocks (one commit for the clocks scheduled together).
        const delayMs = Duration.toMillis(clock.duration)
        const dueAt = yield* storage(
          "schedule a clock",
          run !== undefined
            ? deps.batched(sql.clock(executionId, name, delayMs), { single: true })
            : transaction(Effect.gen(function*() {
              const dueAt = yield* sql.clock(executionId, name, delayMs)
              // Outside a run of this process (not how the engine calls it): the next run, due at the clock.
              yield* enqueueRun(workflow.name, executionId, dueAt)
              return dueAt
            }))
        )
        run?.clocks.set(name, { dueAt, due: false })
        run?.waits.set(name, dueAt)
      })
  }
}
