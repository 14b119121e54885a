/**
 * The differential suite: each scenario runs on Effect's in-memory engine
 * (`WorkflowEngine.layerMemory`) and on Docket's, in the same test, and what
 * each observed (the results, the failures, the activities' side effects and
 * the compensations, in order) must be the same.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import type * as Workflow from "@effect/workflow/Workflow"
import { WorkflowEngine } from "@effect/workflow/WorkflowEngine"
import * as WorkflowEngineMod from "@effect/workflow/WorkflowEngine"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as W from "./workflows.js"

/** An engine under test: its layer (the workflows registered), built once per suite. */
export type EngineLayer = Layer.Layer<WorkflowEngine, unknown, never>

let runs = 0
const freshTag = (scenario: string) => `${scenario}-${process.pid}-${++runs}-${Math.random().toString(36).slice(2, 8)}`

/** Waits (polling the engine, up to 20 s) until the execution is suspended or finished. */
const settled = (
  workflow: { readonly name: string; readonly poll: (id: string) => Effect.Effect<Workflow.Result<unknown, unknown> | undefined, never, WorkflowEngine> },
  executionId: string
) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1000; i++) {
      const result = yield* workflow.poll(executionId)
      if (result !== undefined) return result
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`${workflow.name} ${executionId} did not settle within 20 s`)
  })

const exitSummary = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.match(exit, {
    onSuccess: (value) => ({ ok: value }),
    onFailure: (cause) =>
      Cause.isInterruptedOnly(cause)
        ? { interrupted: true }
        : { failed: Cause.failureOption(cause).pipe((o) => (o._tag === "Some" ? o.value : Cause.pretty(cause))) }
  })

/** Each scenario: a program over the engine that returns what it observed. */
const scenarios: Record<string, (tag: string) => Effect.Effect<unknown, unknown, WorkflowEngine>> = {
  "activities run once each, and a second execute joins the first": (tag) =>
    Effect.gen(function*() {
      const first = yield* W.Steps.execute({ tag })
      const again = yield* W.Steps.execute({ tag })
      return { first, again, log: W.entries(tag) }
    }),
  "an activity's retries, each attempt stored": (tag) =>
    Effect.map(Effect.exit(W.Retries.execute({ tag })), (exit) => ({ exit: exitSummary(exit), log: W.entries(tag) })),
  "a saga that succeeds keeps its charge": (tag) =>
    Effect.map(Effect.exit(W.Saga.execute({ tag, fail: false })), (exit) => ({ exit: exitSummary(exit), log: W.entries(tag) })),
  "a saga that fails compensates": (tag) =>
    Effect.map(Effect.exit(W.Saga.execute({ tag, fail: true })), (exit) => ({ exit: exitSummary(exit), log: W.entries(tag) })),
  "a deferred completed from outside resumes the execution": (tag) =>
    Effect.gen(function*() {
      const id = yield* W.Approve.execute({ tag }, { discard: true })
      const before = yield* settled(W.Approve, id)
      const token = yield* DurableDeferred.tokenFromPayload(W.Approval, { workflow: W.Approve, payload: { tag } })
      yield* DurableDeferred.done(W.Approval, { token, exit: Exit.succeed("yes") })
      const result = yield* W.Approve.execute({ tag })
      return { before: before._tag, result, log: W.entries(tag) }
    }),
  "an interrupt of a suspended execution runs its compensations": (tag) =>
    Effect.gen(function*() {
      const id = yield* W.Approve.execute({ tag }, { discard: true })
      yield* settled(W.Approve, id)
      yield* W.Approve.interrupt(id)
      let result = yield* W.Approve.poll(id)
      for (let i = 0; i < 1000 && result?._tag !== "Complete"; i++) {
        yield* Effect.sleep("20 millis")
        result = yield* W.Approve.poll(id)
      }
      return { exit: result?._tag === "Complete" ? exitSummary(result.exit) : result, log: W.entries(tag) }
    }),
  "a durable clock": (tag) =>
    Effect.map(W.Sleeper.execute({ tag, ms: 1200 }), (slept) => ({ sleptEnough: slept >= 1150, log: W.entries(tag) })),
  // A wake-up before the clock's due time (here `resume`) runs the execution early; it must
  // still sleep until the clock, not fire it then, nor lose it.
  "an execution woken before its clock is due still sleeps until it": (tag) =>
    Effect.gen(function*() {
      const id = yield* W.Sleeper.execute({ tag, ms: 1500 }, { discard: true })
      const before = yield* settled(W.Sleeper, id)
      yield* W.Sleeper.resume(id)
      const slept = yield* W.Sleeper.execute({ tag, ms: 1500 })
      return { before: before._tag, sleptEnough: slept >= 1450, log: W.entries(tag) }
    }),
  // The deferred's wake-up must not wait for the clock (its run, due at the clock, brought forward).
  "a clock racing a deferred: the deferred first, at once; the clock then fires for nothing": (tag) =>
    Effect.gen(function*() {
      const id = yield* W.ClockRace.execute({ tag, ms: 3000 }, { discard: true })
      const before = yield* settled(W.ClockRace, id)
      const token = yield* DurableDeferred.tokenFromPayload(W.Poke, { workflow: W.ClockRace, payload: { tag, ms: 3000 } })
      const poked = Date.now()
      yield* DurableDeferred.done(W.Poke, { token, exit: Exit.succeed("poked") })
      const winner = yield* W.ClockRace.execute({ tag, ms: 3000 })
      const atOnce = Date.now() - poked < 2000
      // Past the clock's due time: its firing must change nothing.
      yield* Effect.sleep("3000 millis")
      const after = yield* W.ClockRace.poll(id)
      return { before: before._tag, winner, atOnce, after: after?._tag, log: W.entries(tag) }
    }),
  "a clock racing a deferred: the clock first": (tag) =>
    Effect.map(W.ClockRace.execute({ tag, ms: 500 }), (winner) => ({ winner, log: W.entries(tag) })),
  "two clocks racing, the later reached first: the earlier fires at its time": (tag) =>
    Effect.gen(function*() {
      const started = Date.now()
      const winner = yield* W.TwoClocks.execute({ tag, short: 400, long: 60_000 })
      return { winner, soon: Date.now() - started < 5000, log: W.entries(tag) }
    }),
  "children joined by their parent": (tag) =>
    Effect.map(W.Parent.execute({ tag }), (sum) => ({ sum, log: [...W.entries(tag)].sort() })),
  "a race between a deferred and an activity": (tag) =>
    Effect.map(W.Race.execute({ tag }), (winner) => ({ winner, log: W.entries(tag) }))
}

/** The suite for one engine of Docket's (`docket`), against the in-memory engine. */
export const differentialSuite = (name: string, docket: () => Promise<EngineLayer>) =>
  describe(`workflows on ${name}, against the in-memory engine`, () => {
    const memory = ManagedRuntime.make(W.AllLive.pipe(Layer.provideMerge(WorkflowEngineMod.layerMemory)))
    let runtime: ManagedRuntime.ManagedRuntime<WorkflowEngine, unknown> | undefined
    beforeAll(async () => {
      runtime = ManagedRuntime.make(await docket())
      await runtime.runPromise(Effect.void)
    })
    afterAll(async () => {
      await runtime?.dispose()
      await memory.dispose()
    })
    for (const [scenario, program] of Object.entries(scenarios)) {
      it(scenario, async () => {
        const expected = await memory.runPromise(program(freshTag("memory")))
        const observed = await runtime!.runPromise(program(freshTag("docket")))
        expect(observed).toEqual(expected)
      })
    }
  })
