/**
 * Many workflows asleep at once (issue 32): `--executions` (default 10,000)
 * executions each sleep on a stored durable clock of `--sleep` seconds
 * (default 90), then run one activity that prints when it ran. A worker
 * process runs them until every one is suspended; its RSS is sampled every
 * second while they sleep (a suspended execution should cost rows, not
 * memory). Then it is stopped, a new worker process starts before the
 * clocks come due, and each execution's lateness (its activity's start minus
 * its clock's due time) is reported: p50, p99, max.
 *
 *   npx tsx bench/workflow-sleepers.ts [--database URL|file] [--executions 10000] [--sleep 40]
 *
 * Internally `worker <database>` is the worker process's mode.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Activity, DurableClock, Workflow } from "@effect/workflow"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Schema } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Worker from "../src/Worker.js"
import * as Workflows from "../src/Workflows.js"

const Sleeper = Workflow.make({
  name: "Sleeper",
  payload: { n: Schema.Number, seconds: Schema.Number },
  idempotencyKey: ({ n }) => `sleeper-${n}`
})
const SleeperLive = Sleeper.toLayer(({ n, seconds }) =>
  Effect.gen(function*() {
    yield* DurableClock.sleep({ name: "nap", duration: `${seconds} seconds`, inMemoryThreshold: "1 millis" })
    yield* Activity.make({ name: "woke", execute: Effect.sync(() => console.log(`woke ${n} ${Date.now()}`)) })
  })
)

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1]! : fallback
}

if (process.argv[2] === "worker") {
  const database = process.argv[3]!
  const main = Effect.gen(function*() {
    const worker = yield* Worker.Worker
    console.log(`ready ${worker.id}`)
    return yield* Effect.never
  })
  NodeRuntime.runMain(Effect.provide(main, Workflows.layer({ database, handlers: [], workflows: SleeperLive, concurrency: 50 })))
} else {
  const EXECUTIONS = Number(arg("executions", "10000"))
  const SLEEP = Number(arg("sleep", "90"))
  const database = arg("database", join(mkdtempSync(join(tmpdir(), "docket-sleepers-")), "sleepers.db"))
  const SELF = fileURLToPath(import.meta.url)

  const rss = (pid: number) => {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024)
  }
  const startWorker = () => {
    const child = spawn(process.execPath, ["--import", "tsx", SELF, "worker", database], { stdio: ["ignore", "pipe", "inherit"] })
    const woke = new Map<number, number>()
    let ready: () => void
    const isReady = new Promise<void>((resolve) => (ready = resolve))
    let partial = ""
    child.stdout!.setEncoding("utf8").on("data", (data: string) => {
      const lines = (partial + data).split("\n")
      partial = lines.pop()!
      for (const line of lines) {
        if (line.startsWith("ready ")) ready()
        const m = /^woke (\d+) (\d+)$/.exec(line)
        if (m) woke.set(Number(m[1]), Number(m[2]))
      }
    })
    return { child, woke, isReady }
  }
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

  const program = Effect.gen(function*() {
    const first = startWorker()
    console.error("starting the first worker")
    yield* Effect.promise(() => first.isReady)
    console.error("first worker ready")
    yield* Effect.promise(() => sleep(2000))
    const atRest = rss(first.child.pid!)
    const t0 = performance.now()
    yield* Effect.forEach(Array.from({ length: EXECUTIONS }, (_, n) => n), (n) => Sleeper.execute({ n, seconds: SLEEP }, { discard: true }), {
      concurrency: 50,
      discard: true
    })
    const startedS = (performance.now() - t0) / 1000
    // Until every one is suspended on its clock.
    const sql = yield* SqlClient.SqlClient
    const count = (state: string) =>
      Effect.map(sql.unsafe<{ n: number | string }>(`SELECT count(*) AS n FROM docket_workflow_executions WHERE state = '${state}'`), (r) => Number(r[0].n))
    while ((yield* count("suspended")) < EXECUTIONS) yield* Effect.promise(() => sleep(500))
    const allSuspendedS = (performance.now() - t0) / 1000
    const dueOf = new Map(
      (yield* sql.unsafe<{ execution_id: string; due_at: number | string }>("SELECT execution_id, due_at FROM docket_workflow_clocks"))
        .map((r) => [r.execution_id, Number(r.due_at)] as const)
    )
    const idOf = new Map<number, string>()
    for (let n = 0; n < EXECUTIONS; n++) idOf.set(n, yield* Sleeper.executionId({ n, seconds: SLEEP }))
    const firstDue = Math.min(...dueOf.values())
    const samples: Array<number> = []
    for (let i = 0; i < 10; i++) {
      samples.push(rss(first.child.pid!))
      yield* Effect.promise(() => sleep(1000))
    }
    first.child.kill("SIGTERM")
    yield* Effect.promise(() => new Promise((resolve) => first.child.on("close", resolve)))
    const second = startWorker()
    yield* Effect.promise(() => second.isReady)
    const restartedBeforeDueS = (firstDue - Date.now()) / 1000
    while (second.woke.size < EXECUTIONS) yield* Effect.promise(() => sleep(500))
    // Lateness: each execution's wake-up against its clock's due time.
    const lateness: Array<number> = []
    for (const [n, at] of second.woke) lateness.push(at - dueOf.get(idOf.get(n)!)!)
    second.child.kill("SIGTERM")
    lateness.sort((a, b) => a - b)
    const q = (p: number) => lateness[Math.min(lateness.length - 1, Math.floor(p * lateness.length))]
    console.log(`executions ${EXECUTIONS}, clock ${SLEEP} s, database ${database.startsWith("postgres") ? "PostgreSQL" : "SQLite"}`)
    console.log(`started in ${startedS.toFixed(1)} s, all suspended after ${allSuspendedS.toFixed(1)} s`)
    console.log(`worker RSS at rest ${atRest} MB; while ${EXECUTIONS} sleep: ${samples.join(", ")} MB`)
    console.log(`new worker ready ${restartedBeforeDueS.toFixed(1)} s before the first clock's due time`)
    console.log(`lateness after the due time (ms): p50 ${q(0.5)}, p99 ${q(0.99)}, max ${lateness[lateness.length - 1]}`)
  })
  NodeRuntime.runMain(Effect.provide(program, Workflows.layerClient(database)))
}
