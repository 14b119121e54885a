/**
 * Operating workflows by id (`Workflows.control`) and bad input, on one
 * dialect: what `show` reports of an execution, and that a bad token, a
 * token or id of no execution and a payload that does not encode are typed
 * errors (or, through the engine's own API, defects naming them) that write
 * nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import { WorkflowEngine } from "@effect/workflow/WorkflowEngine"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as QueueRepo from "../../src/QueueRepo.js"
import * as Workflows from "../../src/Workflows.js"
import { unsafe } from "../support/db.js"
import * as W from "./workflows.js"

type Services = WorkflowEngine | QueueRepo.QueueRepo | SqlClient.SqlClient

const rows = (table: string) => Effect.map(unsafe<{ n: number | string }>(`SELECT count(*) AS n FROM ${table}`), (r) => Number(r[0].n))
const written = Effect.all({
  executions: rows("docket_workflow_executions"),
  activities: rows("docket_workflow_activities"),
  deferreds: rows("docket_workflow_deferreds")
})

const defect = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.exit(effect), (exit) => (Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined))

export const controlSuite = (name: string, layer: () => Promise<Layer.Layer<Services, unknown, never>>) =>
  describe(`operating workflows on ${name}`, () => {
    let runtime: ManagedRuntime.ManagedRuntime<Services, unknown> | undefined
    const run = <A, E>(effect: Effect.Effect<A, E, Services>) => runtime!.runPromise(effect)
    beforeAll(async () => {
      runtime = ManagedRuntime.make(await layer())
    })
    afterAll(() => runtime?.dispose())

    it("show gives an execution's activities, deferreds and children; list finds it by state and name", async () => {
      const tag = `control-${Math.random().toString(36).slice(2, 8)}`
      const control = await run(Workflows.control)
      expect(await run(W.Parent.execute({ tag }))).toBe(14)
      const id = await run(W.Parent.executionId({ tag }))
      const detail = await run(control.show(id))
      expect(detail).toMatchObject({ executionId: id, workflow: "Parent", state: "complete", payload: { tag } })
      expect(detail.result).toEqual({ _tag: "Complete", exit: { _tag: "Success", value: 14 } })
      expect(detail.children.map((c) => c.workflow)).toEqual(["Child", "Child", "Child"])
      expect(detail.children.every((c) => c.state === "complete" && c.parent === id)).toBe(true)
      expect(detail.activities.map((a) => a.name)).toEqual(["sum"])
      const listed = await run(control.list({ state: "complete", workflow: "Parent" }))
      expect(listed.map((e) => e.executionId)).toContain(id)
      expect(await run(control.list({ workflow: "NoSuchWorkflow" }))).toEqual([])

      // A suspended one: its deferred is missing, its state says so; resume of a finished one does nothing.
      const waiting = await run(W.Approve.execute({ tag }, { discard: true }))
      for (let i = 0; i < 500 && (await run(control.show(waiting))).state !== "suspended"; i++) await Effect.runPromise(Effect.sleep(20))
      const suspended = await run(control.show(waiting))
      expect(suspended.state).toBe("suspended")
      expect(suspended.activities.map((a) => a.name)).toEqual(["ask"])
      expect(await run(control.resume(id))).toBe(false)
      const token = await run(DurableDeferred.tokenFromPayload(W.Approval, { workflow: W.Approve, payload: { tag } }))
      await run(control.completeDeferred(token, { success: "by id" }))
      expect(await run(W.Approve.execute({ tag }))).toBe("by id")
      expect((await run(control.show(waiting))).deferreds.map((d) => d.name)).toEqual(["approval"])

      // A stored clock not yet due: shown with its due time; interrupted, the execution ends.
      const sleeper = await run(W.Sleeper.execute({ tag, ms: 3_600_000 }, { discard: true }))
      for (let i = 0; i < 500 && (await run(control.show(sleeper))).state !== "suspended"; i++) await Effect.runPromise(Effect.sleep(20))
      const sleeping = await run(control.show(sleeper))
      expect(sleeping.clocks).toHaveLength(1)
      expect(sleeping.clocks[0].name).toBe("nap")
      expect(sleeping.clocks[0].dueAt - sleeping.updatedAt).toBeGreaterThan(3_500_000)
      expect(await run(control.interrupt(sleeper))).toBe(true)
      for (let i = 0; i < 500 && (await run(control.show(sleeper))).state !== "complete"; i++) await Effect.runPromise(Effect.sleep(20))
      expect((await run(control.show(sleeper))).result).toMatchObject({ _tag: "Complete", exit: { _tag: "Failure" } })
    })

    it("an execute inside the application's transaction starts the execution with its commit, and not at all on a rollback; waiting there is refused", async () => {
      const tag = `tx-${Math.random().toString(36).slice(2, 8)}`
      // This test's own rows: its executions, and their runs' items (waiting, running or done).
      const mine = (id: string) =>
        Effect.all({
          executions: Effect.map(
            unsafe<{ n: number | string }>(`SELECT count(*) AS n FROM docket_workflow_executions WHERE execution_id = '${id}'`),
            (r) => Number(r[0].n)
          ),
          items: Effect.map(Effect.all([
            unsafe<{ n: number | string }>(`SELECT count(*) AS n FROM docket_items WHERE dedupe_key = '${id}'`),
            unsafe<{ n: number | string }>(`SELECT count(*) AS n FROM docket_done WHERE dedupe_key = '${id}'`)
              .pipe(Effect.orElseSucceed(() => [{ n: 0 }]))
          ]), ([a, b]) => Number(a[0].n) + Number(b[0].n))
        })
      const inTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(effect))
      // Rolled back: neither the execution nor its run's item is left.
      const rolled = await run(W.Steps.executionId({ tag: `${tag}-rolled` }))
      const rolledBack = await run(Effect.exit(inTransaction(
        Effect.zipRight(W.Steps.execute({ tag: `${tag}-rolled` }, { discard: true }), Effect.fail("rolled back"))
      )))
      expect(Exit.isFailure(rolledBack)).toBe(true)
      expect(await run(mine(rolled))).toEqual({ executions: 0, items: 0 })
      // Waiting for the result inside the transaction: refused, naming discard; nothing written.
      const waited = await run(W.Steps.executionId({ tag: `${tag}-waited` }))
      const refused = await run(defect(inTransaction(W.Steps.execute({ tag: `${tag}-waited` }))))
      expect(refused).toMatchObject({ _tag: "InvalidInput", field: "discard" })
      expect(await run(mine(waited))).toEqual({ executions: 0, items: 0 })
      // Committed: the execution and its run's item are there at the commit; it runs, and a later
      // execute of the same id joins it.
      const id = await run(W.Steps.executionId({ tag }))
      await run(inTransaction(W.Steps.execute({ tag }, { discard: true })))
      expect(await run(mine(id))).toEqual({ executions: 1, items: 1 })
      expect(await run(W.Steps.execute({ tag }))).toBe("ABC")
      expect(W.entries(tag)).toEqual(["a", "b", "c"])
      expect(W.entries(`${tag}-rolled`)).toEqual([])
    })

    it("a clock fires as its execution's own run (no item of the clock kind); an item of the clock kind an earlier version enqueued still fires", async () => {
      const control = await run(Workflows.control)
      const repo = await run(QueueRepo.QueueRepo)
      const tag = `clockrun-${Math.random().toString(36).slice(2, 8)}`
      // Every item of the clock kind ever enqueued: finished (the totals) or still waiting or running.
      const clockItems = Effect.gen(function*() {
        const finished = (yield* repo.totals).filter((t) => t.kind === Workflows.CLOCK_KIND).reduce((n, t) => n + t.count, 0)
        const open = yield* unsafe<{ n: number | string }>(
          `SELECT count(*) AS n FROM docket_items WHERE kind = '${Workflows.CLOCK_KIND}' AND state IN ('waiting', 'running')`
        )
        return finished + Number(open[0].n)
      })
      expect(await run(W.Sleeper.execute({ tag, ms: 300 }))).toBeGreaterThanOrEqual(250)
      expect(await run(clockItems)).toBe(0)
      expect((await run(control.show(await run(W.Sleeper.executionId({ tag, ms: 300 }))))).deferreds.map((d) => d.name))
        .toEqual(["DurableClock/nap"])

      // A database made by an earlier version: the execution's clock has an item of the clock kind, due now.
      const old = await run(W.Sleeper.execute({ tag: `${tag}-old`, ms: 3_600_000 }, { discard: true }))
      for (let i = 0; i < 500 && (await run(control.show(old))).state !== "suspended"; i++) await Effect.runPromise(Effect.sleep(20))
      await run(repo.enqueue(Workflows.CLOCK_KIND, { workflow: "Sleeper", executionId: old, deferred: "DurableClock/nap" }, {
        key: `${old}/DurableClock/nap`
      }))
      for (let i = 0; i < 500 && (await run(control.show(old))).state !== "complete"; i++) await Effect.runPromise(Effect.sleep(20))
      const fired = await run(control.show(old))
      expect(fired.result).toMatchObject({ _tag: "Complete", exit: { _tag: "Success" } })
      expect(W.entries(`${tag}-old`)).toEqual(["before", "after"])
    })

    it("retention: complete executions are deleted with their steps; suspended ones, and a child of an unfinished parent, are kept", async () => {
      const control = await run(Workflows.control)
      const tag = `prune-${Math.random().toString(36).slice(2, 8)}`
      expect(await run(W.Steps.execute({ tag }))).toBe("ABC")
      const guardian = await run(W.Guardian.execute({ tag }, { discard: true }))
      // Settled: the child finished, and the parent's run after it suspended on the approval.
      const settled = async () => {
        const shown = await run(control.show(guardian))
        const child = shown.children[0]
        return shown.state === "suspended" && child?.state === "complete" && shown.updatedAt >= child.completedAt!
      }
      for (let i = 0; i < 500 && !(await settled()); i++) await Effect.runPromise(Effect.sleep(20))
      expect(await settled()).toBe(true)
      const child = (await run(control.show(guardian))).children[0]!
      expect(child.state).toBe("complete")
      await Effect.runPromise(Effect.sleep(5))

      const pruned = await run(control.prune("1 millis"))
      expect(pruned).toBeGreaterThanOrEqual(1)
      const steps = await run(W.Steps.executionId({ tag }))
      expect(await run(Effect.flip(control.show(steps)))).toMatchObject({ _tag: "ExecutionNotFound" })
      const stepRows = await run(unsafe<{ n: number | string }>(
        "SELECT count(*) AS n FROM docket_workflow_activities WHERE execution_id = $1".replace("$1", "'" + steps + "'")
      ))
      expect(Number(stepRows[0].n)).toBe(0)
      expect((await run(control.show(guardian))).state).toBe("suspended")
      expect((await run(control.show(child.executionId))).state).toBe("complete")

      // Once the parent finishes, both go; an execute of a pruned id runs the workflow again.
      const token = await run(DurableDeferred.tokenFromPayload(W.Approval, { workflow: W.Guardian, payload: { tag } }))
      await run(control.completeDeferred(token, { success: "ok" }))
      expect(await run(W.Guardian.execute({ tag }))).toBe("49 ok")
      await Effect.runPromise(Effect.sleep(5))
      await run(control.prune("1 millis"))
      expect(await run(Effect.flip(control.show(guardian)))).toMatchObject({ _tag: "ExecutionNotFound" })
      expect(await run(Effect.flip(control.show(child.executionId)))).toMatchObject({ _tag: "ExecutionNotFound" })
      expect(await run(W.Steps.execute({ tag }))).toBe("ABC")
      expect(W.entries(tag)).toEqual(["a", "b", "c", "child 7", "a", "b", "c"])
    })

    it("bad input: a bad token, a token or an id of no execution, a payload that does not encode: typed, nothing written", async () => {
      const control = await run(Workflows.control)
      const before = await run(written)

      const garbage = await run(Effect.flip(control.completeDeferred("not a token", { success: 1 })))
      expect(garbage).toMatchObject({ _tag: "InvalidInput", field: "token" })

      const nowhere = DurableDeferred.tokenFromExecutionId(W.Approval, { workflow: W.Approve, executionId: "no-such-execution" })
      const unknown = await run(Effect.flip(control.completeDeferred(nowhere, { success: "x" })))
      expect(unknown).toMatchObject({ _tag: "ExecutionNotFound", executionId: "no-such-execution", workflow: "Approve" })
      for (const op of [control.show("no-such-execution"), control.interrupt("no-such-execution"), control.resume("no-such-execution")]) {
        expect(await run(Effect.flip<unknown, unknown, never>(op))).toMatchObject({ _tag: "ExecutionNotFound" })
      }

      // Through Effect's own API: the engine's operations have no error channel, so these are defects naming it.
      const done = await run(defect(DurableDeferred.done(W.Approval, { token: nowhere, exit: Exit.succeed("x") })))
      expect(done).toBeInstanceOf(Workflows.ExecutionNotFound)
      const badPayload = await run(defect(Effect.flatMap(WorkflowEngine, (engine) =>
        engine.execute(W.Steps, { executionId: "bad-payload", payload: { tag: 42 } as never }))))
      expect(badPayload).toMatchObject({ _tag: "InvalidInput", field: "payload" })
      expect(String((badPayload as Error).message)).toContain("Steps")

      expect(await run(written)).toEqual(before)
    })
  })
