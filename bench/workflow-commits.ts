/**
 * What one execution of a one-activity workflow costs Docket on PostgreSQL
 * (issue 32): `--executions` (default 500) executions started at once and
 * awaited, on a fresh database, then the database's own counters
 * (pg_stat_database, pg_stat_user_tables) divided by the executions:
 * transactions committed (each statement outside a transaction is one),
 * rows inserted, updated and deleted by table. A warm-up execution and the
 * counters' flush are outside the count.
 *
 *   npx tsx bench/workflow-commits.ts [--executions 500]
 */
import { Activity, Workflow } from "@effect/workflow"
import { Effect, Schema } from "effect"
import pg from "pg"
import * as Workflows from "../src/Workflows.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1]! : fallback
}
const EXECUTIONS = Number(arg("executions", "500"))
const ADMIN = process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"

const One = Workflow.make({
  name: "One",
  payload: { n: Schema.Number },
  success: Schema.Number,
  idempotencyKey: ({ n }) => `one-${n}`
})
const OneLive = One.toLayer(({ n }) => Activity.make({ name: "s1", success: Schema.Number, execute: Effect.succeed(n) }))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const main = async () => {
  const name = `docket_wfcommits_${process.pid}`
  const admin = new pg.Client({ connectionString: ADMIN })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  const url = ADMIN.replace(/\/[^/]*$/, `/${name}`)
  const counters = async () => {
    const c = new pg.Client({ connectionString: url })
    await c.connect()
    const db = await c.query(`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`)
    const tables = await c.query(`SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables`)
    await c.end()
    const rows = new Map<string, [number, number, number]>()
    for (const r of tables.rows) rows.set(r.relname, [Number(r.n_tup_ins), Number(r.n_tup_upd), Number(r.n_tup_del)])
    return { commits: Number(db.rows[0].xact_commit), rows }
  }
  try {
    const program = Effect.gen(function*() {
      yield* One.execute({ n: -1 })
      yield* Effect.promise(() => sleep(11_000)) // counters flushed: an idle backend flushes its own within 10 s
      const before = yield* Effect.promise(counters)
      const t0 = performance.now()
      yield* Effect.forEach(Array.from({ length: EXECUTIONS }, (_, n) => n), (n) => One.execute({ n }), {
        concurrency: "unbounded",
        discard: true
      })
      const seconds = (performance.now() - t0) / 1000
      yield* Effect.promise(() => sleep(11_000))
      const after = yield* Effect.promise(counters)
      return { before, after, seconds }
    })
    const { after, before, seconds } = await Effect.runPromise(
      Effect.scoped(Effect.provide(program, Workflows.layer({ database: url, handlers: [], workflows: OneLive, concurrency: 50 })))
    )
    const per = (n: number) => (n / EXECUTIONS).toFixed(2)
    console.log(`${EXECUTIONS} executions of one activity in ${seconds.toFixed(1)} s (${(EXECUTIONS / seconds).toFixed(0)}/s)`)
    // The two counter reads between are two commits of their own.
    console.log(`transactions committed per execution: ${per(after.commits - before.commits - 2)}`)
    console.log("| table | inserted | updated | deleted |  (per execution)")
    for (const [table, [i, u, d]] of after.rows) {
      const [i0, u0, d0] = before.rows.get(table) ?? [0, 0, 0]
      if (i + u + d - i0 - u0 - d0 > 0) console.log(`| ${table} | ${per(i - i0)} | ${per(u - u0)} | ${per(d - d0)} |`)
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  }
  process.exit(0)
}

void main()
