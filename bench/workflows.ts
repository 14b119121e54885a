/**
 * Durable workflows side by side (issue 32): Docket's engine (docket/Workflows)
 * against Effect's own `ClusterWorkflowEngine` over `SingleRunner` with its SQL
 * message storage (what an Effect user would pick instead) and against DBOS
 * Transact (@dbos-inc/dbos-sdk, its workflows and steps, in a process of its
 * own: bench/lib/dbosChild.ts; `dbos-pg` its default, run in the starting
 * process, `dbos-queue-pg` through a DBOS queue polled every second, its
 * default, `dbos-queue10-pg` the same polled every 10 ms), on the same
 * PostgreSQL, and Docket on a SQLite file. The same workflows on each: 1 and
 * 5 no-op activities (steps).
 *
 * - throughput: `--executions` executions started at once (each `execute`
 *   waits for its result), executions/s from the first start to the last result;
 * - latency: 30 executions one after another; per step, the time from one
 *   activity's start to the next's (a step's result stored, the next begun),
 *   p50 and p99, and each execution's start-to-result p50.
 *
 * Each (engine, workload) runs `--repeat` times, engines alternated, each on a
 * fresh database; medians are printed as a Markdown table with ratios to Docket.
 *
 *   npx tsx bench/workflows.ts [--executions 500] [--repeat 3] [--only docket-pg,cluster-pg,dbos-pg,dbos-queue-pg,dbos-queue10-pg,docket-sqlite]
 */
import * as ClusterWorkflowEngine from "@effect/cluster/ClusterWorkflowEngine"
import * as SingleRunner from "@effect/cluster/SingleRunner"
import { PgClient } from "@effect/sql-pg"
import { Activity, Workflow } from "@effect/workflow"
import type { WorkflowEngine } from "@effect/workflow/WorkflowEngine"
import { Effect, Layer, Redacted, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import pg from "pg"
import * as Workflows from "../src/Workflows.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1]! : fallback
}
const EXECUTIONS = Number(arg("executions", "500"))
const REPEAT = Number(arg("repeat", "3"))
const ADMIN = process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"
const ENGINES = arg("only", "docket-pg,cluster-pg,dbos-pg,dbos-queue-pg,dbos-queue10-pg,docket-sqlite").split(",")

// Step starts of the latency runs, by execution.
const starts = new Map<string, Array<number>>()

const make = (steps: number) => {
  const W = Workflow.make({
    name: `Steps${steps}`,
    payload: { run: Schema.String, n: Schema.Number },
    success: Schema.Number,
    idempotencyKey: ({ n, run }) => `${run}-${n}`
  })
  const live = W.toLayer(({ n, run }) =>
    Effect.gen(function*() {
      let sum = 0
      for (let s = 1; s <= steps; s++) {
        sum += yield* Activity.make({
          name: `s${s}`,
          success: Schema.Number,
          execute: Effect.sync(() => {
            const key = `${run}-${n}`
            starts.set(key, [...(starts.get(key) ?? []), performance.now()])
            return s
          })
        })
      }
      return sum
    })
  )
  return { W, live }
}
const One = make(1)
const Five = make(5)

const freshPg = async () => {
  const name = `docket_wfbench_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const admin = new pg.Client({ connectionString: ADMIN })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = ADMIN.replace(/\/[^/]*$/, `/${name}`)
  return {
    url,
    drop: async () => {
      const c = new pg.Client({ connectionString: ADMIN })
      await c.connect()
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await c.end()
    }
  }
}

type Engine = (workflows: Layer.Layer<never, never, WorkflowEngine>) => Promise<{
  readonly layer: Layer.Layer<WorkflowEngine, unknown>
  readonly cleanup: () => Promise<void>
}>

const engines: Record<string, Engine> = {
  "docket-pg": async (workflows) => {
    const db = await freshPg()
    return { layer: Workflows.layer({ database: db.url, handlers: [], workflows, concurrency: 50 }), cleanup: db.drop }
  },
  "docket-sqlite": async (workflows) => {
    const dir = mkdtempSync(join(tmpdir(), "docket-wfbench-"))
    return {
      layer: Workflows.layer({ database: join(dir, "bench.db"), handlers: [], workflows, concurrency: 50 }),
      cleanup: async () => rmSync(dir, { recursive: true, force: true })
    }
  },
  "cluster-pg": async (workflows) => {
    const db = await freshPg()
    const layer = workflows.pipe(
      Layer.provideMerge(ClusterWorkflowEngine.layer),
      Layer.provideMerge(SingleRunner.layer({ runnerStorage: "sql" })),
      Layer.provide(PgClient.layer({ url: Redacted.make(db.url) }))
    )
    return { layer, cleanup: db.drop }
  }
}

// DBOS: a child process per round, on a fresh database (see bench/lib/dbosChild.ts).
const DBOS_MODES: Record<string, string> = { "dbos-pg": "direct", "dbos-queue-pg": "queue", "dbos-queue10-pg": "queue:10" }
const dbos = async (steps: number, mode: string): Promise<Figures> => {
  const db = await freshPg()
  try {
    const child = fileURLToPath(new URL("./lib/dbosChild.ts", import.meta.url))
    const tsx = fileURLToPath(new URL("../node_modules/tsx/dist/cli.mjs", import.meta.url))
    const out = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [tsx, child, db.url, String(steps), String(EXECUTIONS), mode], { maxBuffer: 1 << 24 }, (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout))
    )
    return JSON.parse(out.trim().split("\n").pop()!) as Figures
  } finally {
    await db.drop()
  }
}

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
}
const median = (values: ReadonlyArray<number>) => quantile(values, 0.5)

interface Figures {
  readonly perSecond: number
  readonly stepP50: number
  readonly stepP99: number
  readonly executionP50: number
}

const measure = (engine: string, w: typeof One, round: number) =>
  Effect.gen(function*() {
    const run = `${engine}-${round}-${Math.random().toString(36).slice(2, 6)}`
    // Warm-up: one execution (the pool running, statements prepared).
    yield* w.W.execute({ run: `${run}-warm`, n: 0 })
    const t0 = performance.now()
    yield* Effect.forEach(Array.from({ length: EXECUTIONS }, (_, n) => n), (n) => w.W.execute({ run, n }), {
      concurrency: "unbounded",
      discard: true
    })
    const perSecond = EXECUTIONS / ((performance.now() - t0) / 1000)
    const steps: Array<number> = []
    const executions: Array<number> = []
    for (let n = 0; n < 30; n++) {
      const key = `${run}-seq`
      const t = performance.now()
      yield* w.W.execute({ run: key, n })
      const end = performance.now()
      executions.push(end - t)
      const s = starts.get(`${key}-${n}`) ?? []
      for (let i = 1; i < s.length; i++) steps.push(s[i] - s[i - 1])
      steps.push(end - s[s.length - 1]) // the last step: its result stored, the execution's result delivered
    }
    return { perSecond, stepP50: median(steps), stepP99: quantile(steps, 0.99), executionP50: median(executions) }
  })

const main = async () => {
  const rows: Array<string> = []
  for (const [label, w] of [["1 activity", One], ["5 activities", Five]] as const) {
    const results = new Map<string, Array<Figures>>()
    for (let round = 0; round < REPEAT; round++) {
      for (const engine of ENGINES) {
        const dbosMode = DBOS_MODES[engine]
        if (dbosMode !== undefined) {
          const figures = await dbos(w === One ? 1 : 5, dbosMode)
          results.set(engine, [...(results.get(engine) ?? []), figures])
          console.log(`${label} ${engine} #${round + 1}: ${figures.perSecond.toFixed(0)} exec/s, step p50 ${figures.stepP50.toFixed(2)} ms p99 ${figures.stepP99.toFixed(2)} ms, execution p50 ${figures.executionP50.toFixed(2)} ms`)
          continue
        }
        const made = await engines[engine]!(w.live as Layer.Layer<never, never, WorkflowEngine>)
        try {
          const figures = await Effect.runPromise(
            Effect.scoped(Effect.provide(measure(engine, w, round), made.layer)) as Effect.Effect<Figures>
          )
          results.set(engine, [...(results.get(engine) ?? []), figures])
          console.log(`${label} ${engine} #${round + 1}: ${figures.perSecond.toFixed(0)} exec/s, step p50 ${figures.stepP50.toFixed(2)} ms p99 ${figures.stepP99.toFixed(2)} ms, execution p50 ${figures.executionP50.toFixed(2)} ms`)
        } finally {
          await made.cleanup()
        }
      }
    }
    const base = median((results.get(ENGINES[0]!) ?? []).map((f) => f.perSecond))
    for (const engine of ENGINES) {
      const list = results.get(engine) ?? []
      const m = (f: (x: Figures) => number) => median(list.map(f))
      rows.push(
        `| ${label} | ${engine} | ${m((f) => f.perSecond).toFixed(0)} | ${(m((f) => f.perSecond) / base).toFixed(2)}x | ${m((f) => f.stepP50).toFixed(2)} | ${m((f) => f.stepP99).toFixed(2)} | ${m((f) => f.executionP50).toFixed(2)} |`
      )
    }
  }
  console.log(`\n${EXECUTIONS} executions at once for the rate; 30 in sequence for latencies; medians of ${REPEAT}\n`)
  console.log("| workflow | engine | executions/s | vs first | step p50 ms | step p99 ms | execution p50 ms |")
  console.log("|---|---|---:|---:|---:|---:|---:|")
  for (const row of rows) console.log(row)
  process.exit(0)
}

void main()
