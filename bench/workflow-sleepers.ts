/**
 * Many workflows asleep at once (issue 32): `--executions` (default 10,000)
 * executions each sleep on a stored durable clock of `--sleep` seconds
 * (default 90), then run one activity that prints when it ran. A worker
 * process runs them until every one is suspended; its RSS is sampled every
 * second while they sleep (a suspended execution should cost rows, not
 * memory). Then it is stopped, a new worker process starts before the
 * clocks come due, and each execution's lateness (its activity's start minus
 * its clock's due time) is reported: p50, p99, max; split in two: the
 * clock's firing (its deferred stored, minus the due time) and the run after
 * it (the activity's start, minus the deferred stored). The new worker's CPU
 * time over the firing is given against the wall time (near 1 s/s: the
 * worker's one thread is the bound). A clock fires as its execution's next
 * run (one item, keyed by the execution, due at the clock's time: that run
 * stores the clock's deferred as it starts).
 *
 *   npx tsx bench/workflow-sleepers.ts [--database URL|file] [--executions 10000] [--sleep 90]
 *     [--concurrency 50] [--trace] [--cpu-prof DIR]
 *
 * `--concurrency` is the worker's (its slots). `--trace` adds each step of a
 * firing (the items' claims, starts and ends, from the worker's events).
 * `--cpu-prof DIR`: the new worker's CPU profile, written to DIR as it stops.
 * Internally `worker <database> <concurrency> [--trace]` is the worker process's mode.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Activity, DurableClock, Workflow } from "@effect/workflow"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Queue, Schema } from "effect"
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
  const trace = process.argv.includes("--trace")
  const main = Effect.gen(function*() {
    const worker = yield* Worker.Worker
    if (trace) {
      // Each item's claim, start and end (its handler's), for the breakdown of --trace.
      const events = yield* worker.subscribeTo(["Claimed", "Started", "Completed"])
      yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.takeBetween(events, 1, 10_000), (chunk) =>
        Effect.sync(() => {
          const now = Date.now()
          const lines: Array<string> = []
          for (const e of chunk) {
            const tag = e._tag === "Completed" ? "D" : e._tag[0]
            const what = e.claim.kind === "docket.workflow.clock" ? "c" : "r"
            lines.push(`ev ${tag} ${what} ${e.claim.key} ${now}`)
          }
          if (lines.length > 0) console.log(lines.join("\n"))
        }))))
    }
    console.log(`ready ${worker.id}`)
    return yield* Effect.never
  })
  const concurrency = Number(process.argv[4])
  NodeRuntime.runMain(
    Effect.provide(Effect.scoped(main), Workflows.layer({ database, handlers: [], workflows: SleeperLive, concurrency }))
  )
} else {
  const EXECUTIONS = Number(arg("executions", "10000"))
  const SLEEP = Number(arg("sleep", "90"))
  const CONCURRENCY = Number(arg("concurrency", "50"))
  const database = arg("database", join(mkdtempSync(join(tmpdir(), "docket-sleepers-")), "sleepers.db"))
  const SELF = fileURLToPath(import.meta.url)

  const cpuSeconds = (pid: number) => {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100 // utime + stime, in clock ticks of 10 ms
  }
  const rss = (pid: number) => {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024)
  }
  const TRACE = process.argv.includes("--trace")
  const PROFILE = arg("cpu-prof", "")
  const startWorker = (profile = false) => {
    const args = [
      ...(profile && PROFILE !== "" ? ["--cpu-prof", "--cpu-prof-dir", PROFILE] : []),
      ...["--import", "tsx", SELF, "worker", database, String(CONCURRENCY)],
      ...(TRACE ? ["--trace"] : [])
    ]
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] })
    const woke = new Map<number, number>()
    // --trace: by "c"/"r" (a clock's item, a run's), its key and the event's letter (Claimed, Started,
    // Done: its handler ended), the time it was seen.
    const events = new Map<string, number>()
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
        const e = /^ev (\w) (\w) (\S+) (\d+)$/.exec(line)
        if (e && !events.has(`${e[2]} ${e[3]} ${e[1]}`)) events.set(`${e[2]} ${e[3]} ${e[1]}`, Number(e[4]))
      }
    })
    return { child, woke, isReady, events }
  }
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

  // --trace: each step of a firing, from the events of the new worker (seen as it printed them).
  // A firing is the execution's own run (its item keyed by the execution); before, it was a
  // clock's item (kind docket.workflow.clock) and then the run it woke: both are read.
  const printSteps = (
    second: ReturnType<typeof startWorker>,
    idOf: ReadonlyMap<number, string>,
    dueOf: ReadonlyMap<string, number>,
    firedAt: ReadonlyMap<string, number>,
    quantiles: (values: Array<number>) => string
  ) => {
    const clockKey = new Map<string, string>()
    for (const k of second.events.keys()) {
      const [what, key] = k.split(" ")
      if (what === "c") clockKey.set(key!.slice(0, key!.indexOf("/")), key!)
    }
    const ev = (what: string, key: string, tag: string) => second.events.get(`${what} ${key} ${tag}`) ?? NaN
    const phases: Record<string, Array<number>> = {}
    const add = (name: string, ms: number) => {
      if (!Number.isNaN(ms)) (phases[name] ??= []).push(ms)
    }
    for (const [n, at] of second.woke) {
      const id = idOf.get(n)!
      const c = clockKey.get(id)
      if (c !== undefined) {
        add("clock item claimed - due", ev("c", c, "C") - dueOf.get(id)!)
        add("clock item started - claimed", ev("c", c, "S") - ev("c", c, "C"))
        add("clock's handler ended - started (the firing's commit)", ev("c", c, "D") - ev("c", c, "S"))
        add("run item claimed - clock's handler ended", ev("r", id, "C") - ev("c", c, "D"))
      } else {
        add("run item claimed - due", ev("r", id, "C") - dueOf.get(id)!)
      }
      add("run started - claimed", ev("r", id, "S") - ev("r", id, "C"))
      if (c === undefined) add("deferred stored - run started (the firing's commit)", firedAt.get(id)! - ev("r", id, "S"))
      add("activity start - run started (reads, replay)", at - ev("r", id, "S"))
    }
    for (const [name, values] of Object.entries(phases)) console.log(`  ${name} (ms): ${quantiles(values)}`)
  }

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
    while ((yield* count("suspended")) < EXECUTIONS) {
      if ((yield* count("complete")) > 0) return yield* Effect.die(new Error("a clock came due before all slept: give a longer --sleep"))
      yield* Effect.promise(() => sleep(500))
    }
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
    const second = startWorker(true)
    yield* Effect.promise(() => second.isReady)
    const restartedBeforeDueS = (firstDue - Date.now()) / 1000
    yield* Effect.promise(() => sleep(Math.max(0, firstDue - Date.now())))
    const cpu0 = cpuSeconds(second.child.pid!)
    const wall0 = Date.now()
    while (second.woke.size < EXECUTIONS) yield* Effect.promise(() => sleep(100))
    const cpu = cpuSeconds(second.child.pid!) - cpu0
    const wall = (Date.now() - wall0) / 1000
    const firedAt = new Map(
      (yield* sql.unsafe<{ execution_id: string; created_at: number | string }>(
        "SELECT execution_id, created_at FROM docket_workflow_deferreds"
      )).map((r) => [r.execution_id, Number(r.created_at)] as const)
    )
    // Lateness: each execution's wake-up against its clock's due time.
    const lateness: Array<number> = []
    const firing: Array<number> = []
    const after: Array<number> = []
    for (const [n, at] of second.woke) {
      const id = idOf.get(n)!
      lateness.push(at - dueOf.get(id)!)
      firing.push(firedAt.get(id)! - dueOf.get(id)!)
      after.push(at - firedAt.get(id)!)
    }
    second.child.kill("SIGTERM")
    const quantiles = (values: Array<number>) => {
      values.sort((a, b) => a - b)
      const q = (p: number) => values[Math.min(values.length - 1, Math.floor(p * values.length))]
      return `p50 ${q(0.5)}, p99 ${q(0.99)}, max ${values[values.length - 1]}`
    }
    const within = lateness.filter((ms) => ms <= 1000).length
    console.log(`executions ${EXECUTIONS}, clock ${SLEEP} s, worker concurrency ${CONCURRENCY}, database ${database.startsWith("postgres") ? "PostgreSQL" : "SQLite"}`)
    console.log(`started in ${startedS.toFixed(1)} s, all suspended after ${allSuspendedS.toFixed(1)} s`)
    console.log(`worker RSS at rest ${atRest} MB; while ${EXECUTIONS} sleep: ${samples.join(", ")} MB`)
    console.log(`new worker ready ${restartedBeforeDueS.toFixed(1)} s before the first clock's due time`)
    console.log(`clocks due over ${((Math.max(...dueOf.values()) - firstDue) / 1000).toFixed(1)} s`)
    console.log(`lateness after the due time (ms): ${quantiles(lateness)}; within a second: ${within} of ${EXECUTIONS}`)
    console.log(`  the clock's firing (deferred stored - due, ms): ${quantiles(firing)}`)
    console.log(`  the run after it (activity start - deferred stored, ms): ${quantiles(after)}`)
    console.log(`new worker's CPU from the first due time to the last wake-up: ${cpu.toFixed(1)} s over ${wall.toFixed(1)} s`)
    if (TRACE) printSteps(second, idOf, dueOf, firedAt, quantiles)
  })
  NodeRuntime.runMain(Effect.provide(program, Workflows.layerClient(database)))
}
