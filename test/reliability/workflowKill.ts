/**
 * Workflows under kills (issue 32), on PostgreSQL and on a SQLite file shared
 * by the processes: 200 executions of a
 * five-activity workflow, three worker processes (the application's own,
 * test/fixtures/reliability/workflow/worker.ts: 10 slots, 2 s lease), a
 * random one SIGKILLed and replaced every second until every execution is
 * complete. Each activity records its runs (start, finish, process) in a
 * file of its process.
 *
 * At the end: every execution complete with its right result; no activity
 * started after its result was stored (a finished activity never ran again);
 * every activity that ran more than once had its earlier runs in processes
 * that were killed (a run a kill cut short ran again).
 *
 * Then timers and deferreds across a restart of every process: 20 executions
 * sleep on a durable clock (3 s) and then await a deferred; every process is
 * killed while they sleep, half the deferreds are completed while none runs,
 * and new processes finish those (the clocks fired after the restart); the
 * rest finish once their deferreds are completed.
 */
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import { Effect, Exit, ManagedRuntime } from "effect"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as Workflows from "../../src/Workflows.js"
import { Five, Go, type StepLine, Waits } from "../fixtures/reliability/workflow/workflows.js"
import { pgAvailable } from "../support/db.js"
import { countOf as count, Crew, scenarioStore, type Store } from "./killLoop.js"
import { delay, fixture, killWorker, report, scaled, stopWorker, waitFor } from "./support.js"

const LEASE_LOST = /lease lost|lease was lost|lease ran out/

const completeCount = (store: Store, workflow: string) =>
  count(store, "SELECT count(*) AS n FROM docket_workflow_executions WHERE workflow = ?1 AND state = 'complete'", [workflow])

/** Every run of every step, from the processes' files. */
const readSteps = (dir: string) => {
  const runs = new Map<string, { execution: number; step: number; pid: number; start: number; end: number | null }>()
  for (const file of readdirSync(dir)) {
    for (const text of readFileSync(join(dir, file), "utf8").split("\n")) {
      if (text === "") continue
      const line = JSON.parse(text) as StepLine
      const run = runs.get(line.run) ?? { execution: line.e, step: line.s, pid: line.pid, start: 0, end: null }
      if (line.start !== undefined) run.start = line.start
      if (line.end !== undefined) run.end = line.end
      runs.set(line.run, run)
    }
  }
  return [...runs.values()].sort((a, b) => a.start - b.start)
}

const scenario = (dialect: "pg" | "sqlite") =>
    it(`200 five-activity executions while a worker is SIGKILLed every second; then clocks and deferreds across a restart of every process (${dialect})`, async () => {
      const executions = scaled(200, 20)
      const store = await scenarioStore(dialect, "wfkill")
      const stepsDir = mkdtempSync(join(tmpdir(), "docket-wfsteps-"))
      const client = ManagedRuntime.make(Workflows.layerClient(store.url))
      const crew = new Crew({
        database: store.url,
        tasks: "",
        script: fixture("workflow", "worker.ts"),
        env: { WF_STEPS_DIR: stepsDir },
        keep: LEASE_LOST
      })
      const { every, killed, live } = crew
      const spawnOne = () => crew.spawn()
      try {
        await client.runPromise(Effect.void) // migrates
        // The workers first, then the executions: started before, they could be done by the first
        // worker up before the first kill (as the transactional scenario was on a quiet machine).
        await Promise.all([spawnOne(), spawnOne(), spawnOne()].map((w) => w.ready(60_000)))
        const started = performance.now()
        await client.runPromise(
          Effect.forEach(Array.from({ length: executions }, (_, i) => i + 1), (n) => Five.execute({ n }, { discard: true }), {
            concurrency: 10
          })
        )

        // A kill every second (while two or more are up) until every execution is complete.
        await crew.killEverySecondUntil(
          "every execution complete",
          async () => (await completeCount(store, "Five")) >= executions,
          240_000
        )
        const drainedMs = performance.now() - started

        // Every result is right, read back through the engine.
        for (let n = 1; n <= executions; n++) {
          const result = await client.runPromise(Effect.flatMap(Five.executionId({ n }), (id) => Five.poll(id)))
          expect(result?._tag).toBe("Complete")
          expect((result as Workflow.Complete<number, never>).exit).toEqual(Exit.succeed(15 * n))
        }

        // Each activity's runs against the moment its result was stored.
        const ids = new Map<string, number>()
        for (let n = 1; n <= executions; n++) ids.set(await client.runPromise(Five.executionId({ n })), n)
        const stored = new Map<string, number>()
        for (const row of await store.rows<{ execution_id: string; name: string; created_at: string | number }>(
          "SELECT execution_id, name, created_at FROM docket_workflow_activities"
        )) stored.set(`${ids.get(row.execution_id)}/${row.name}`, Number(row.created_at))
        const runs = readSteps(stepsDir)
        const byStep = new Map<string, typeof runs>()
        for (const run of runs) byStep.set(`${run.execution}/step${run.step}`, [...(byStep.get(`${run.execution}/step${run.step}`) ?? []), run])
        expect(byStep.size).toBe(executions * 5)
        expect(stored.size).toBe(executions * 5)
        let ranAgain = 0
        let finishedThenAgain = 0
        let afterLostLease = 0
        // A process that lost a lease (frozen past it: on a loaded machine a
        // SQLite process waiting for the write lock is) ran on while the run
        // was claimed again elsewhere: its earlier run is at-least-once too.
        const lostLeases = new Set(every.filter((w) => w.kept.some((l) => LEASE_LOST.test(l))).map((w) => w.pid))
        for (const [step, list] of byStep) {
          const storedAt = stored.get(step)!
          expect(storedAt, step).toBeDefined()
          // No run started after the result was stored: a finished activity never ran again.
          for (const run of list) expect(run.start, step).toBeLessThanOrEqual(storedAt)
          if (list.length > 1) ranAgain++
          // Every run but the last was in a process that was killed (or lost its lease).
          for (const run of list.slice(0, -1)) {
            if (!killed.has(run.pid)) afterLostLease++
            expect(killed.has(run.pid) || lostLeases.has(run.pid), `${step}: an earlier run in ${run.pid}, never killed nor lost a lease`)
              .toBe(true)
            if (run.end !== null) finishedThenAgain++
          }
        }

        // Clocks and deferreds across a restart of every process.
        const waiting = 20
        await client.runPromise(
          Effect.forEach(Array.from({ length: waiting }, (_, i) => i + 1), (n) => Waits.execute({ n, ms: 3000 }, { discard: true }))
        )
        await waitFor("every Waits execution suspended on its clock", async () =>
            (await count(store, "SELECT count(*) AS n FROM docket_workflow_executions WHERE workflow = 'Waits' AND state = 'suspended'")) === waiting, 30_000)
        for (const worker of [...live]) await killWorker(worker)
        const control = await client.runPromise(Workflows.control)
        const token = (n: number) => DurableDeferred.tokenFromPayload(Go, { workflow: Waits, payload: { n, ms: 3000 } })
        for (let n = 1; n <= waiting / 2; n++) {
          await client.runPromise(Effect.flatMap(token(n), (t) => control.completeDeferred(t, { success: `go ${n}` })))
        }
        await delay(3000) // past every clock's due time, with no process running
        const restartedAt = Date.now()
        await Promise.all([spawnOne(), spawnOne()].map((w) => w.ready(60_000)))
        await waitFor("the executions whose deferred was completed finish after the restart", async () => (await completeCount(store, "Waits")) === waiting / 2, 30_000)
        const firstHalfMs = Date.now() - restartedAt
        // Every clock fires after the restart, also those of the executions still waiting for their
        // deferred: each is its execution's run, due at the clock's time, which may come after the
        // runs the completed deferreds woke (due when completed, before the clocks).
        await waitFor("every clock fired after the restart", async () =>
            (await count(store, "SELECT count(*) AS n FROM docket_workflow_deferreds WHERE name = 'DurableClock/nap'")) === waiting, 30_000)
        for (let n = waiting / 2 + 1; n <= waiting; n++) {
          await client.runPromise(Effect.flatMap(token(n), (t) => control.completeDeferred(t, { success: `go ${n}` })))
        }
        await waitFor("the rest finish once their deferreds are completed", async () => (await completeCount(store, "Waits")) === waiting, 30_000)
        const result = await client.runPromise(Effect.flatMap(Waits.executionId({ n: 1, ms: 3000 }), (id) => Waits.poll(id)))
        expect((result as Workflow.Complete<string, never>).exit).toEqual(Exit.succeed("go 1"))

        for (const worker of [...live]) expect(await stopWorker(worker)).toEqual({ code: 0, signal: null })
        const left = await store.rows("SELECT kind, state, dedupe_key, attempts, last_error FROM docket_items WHERE state <> 'done'")
        expect(left).toEqual([])
        // The kills landed while executions ran (else the scenario proved nothing of them).
        expect(crew.kills).toBeGreaterThan(0)
        report(`workflow kill (${dialect})`, {
          executions,
          activities: executions * 5,
          kills: crew.kills,
          workers: every.length,
          activitiesRunAgain: ranAgain,
          finishedButRunAgain: finishedThenAgain,
          runAgainAfterLostLease: afterLostLease,
          drainedS: Math.round(drainedMs / 100) / 10,
          restartFinishMs: firstHalfMs
        })
      } finally {
        await crew.killAll()
        await client.dispose()
        await store.close()
        rmSync(stepsDir, { recursive: true, force: true })
      }
    }, 360_000)

export const workflowKillScenario = () => {
  describe.skipIf(!pgAvailable)("workflows under kills (PostgreSQL)", () => scenario("pg"))
  describe("workflows under kills (SQLite, one file shared by the processes)", () => scenario("sqlite"))
}
