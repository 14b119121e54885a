/**
 * `npx tsx bench/group-claim.ts grouped|plain [items] [groups] [limit]`
 * (issue 36, docs/benchmarks.md "Groups (issue 36)"): the PostgreSQL claim
 * function by itself over a table of `items` due items in `groups` ordered
 * groups (concurrency 1) or in none, each claim rolled back; times of ROUNDS
 * claims of `limit` items. LIMITED=n asks for `limit` with at most n of the
 * grouped kind (what a pool with prefetch asks: its free slots for the
 * grouped kind, the rest for the general walk). EXPLAIN=1 prints
 * auto_explain's plans (with ANALYZE and buffers) of the nested statements
 * over 5 ms. Environment: BENCH_PG_URL.
 */
import { Effect, ManagedRuntime } from "effect"
import pg from "pg"
import * as Docket from "../src/Docket.js"
import * as QueueRepo from "../src/QueueRepo.js"
const adminUrl = process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"
const admin = new pg.Client({ connectionString: adminUrl })
await admin.connect()
const name = `gbcost_${process.pid}`
await admin.query(`CREATE DATABASE ${name}`)
const target = new URL(adminUrl)
target.pathname = `/${name}`
const url = target.toString()
const grouped = process.argv[2] !== "plain"
const n = Number(process.argv[3] ?? 20000), groups = Number(process.argv[4] ?? 1000), limit = Number(process.argv[5] ?? 10)
try {
  const rt = ManagedRuntime.make(Docket.layerClient(url))
  if (grouped) await rt.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (r) => r.declarePerGroup("seq", { concurrency: 1, ordered: true })))
  else await rt.runPromise(QueueRepo.QueueRepo)
  await rt.dispose()
  const c = new pg.Client({ connectionString: url }); await c.connect()
  await c.query(`INSERT INTO docket_items (kind, payload, group_key, run_at, created_at, updated_at)
    SELECT 'seq', '{}', CASE WHEN $3 THEN 'g' || (n % $2::int) END, docket_now_ms() - 1000, docket_now_ms(), docket_now_ms()
    FROM generate_series(0, $1::int - 1) n ORDER BY n`, [n, groups, grouped])
  await c.query("VACUUM ANALYZE docket_items")
  const notices: string[] = []
  if (process.env.EXPLAIN) {
    c.on("notice", (n) => notices.push(n.message ?? ""))
    await c.query("LOAD 'auto_explain'")
    for (const set of [`auto_explain.log_min_duration = ${process.env.EXPLAIN_MS ?? 5}`, "auto_explain.log_nested_statements = on", `auto_explain.log_analyze = ${process.env.EXPLAIN_ANALYZE ?? "on"}`, "auto_explain.log_buffers = on", "auto_explain.log_level = notice"]) await c.query(`SET ${set}`)
  }
  const times: number[] = []
  const rounds = Number(process.env.ROUNDS ?? 30)
  for (let k = 0; k < rounds; k++) {
    await c.query("BEGIN")
    const t0 = performance.now()
    const { rows } = await c.query(`SELECT (item).id FROM docket_claim_next('w', ${limit}, 60000, NULL, ${Number(process.env.LIMITED ?? limit)}, NULL, NULL, NULL, NULL) WHERE (item).id IS NOT NULL`)
    times.push(performance.now() - t0)
    if (rows.length !== Math.min(limit, Number(process.env.LIMITED ?? limit))) console.log("got", rows.length)
    await c.query("ROLLBACK")
  }
  console.log(times.map((t) => t.toFixed(1)).join(" "))
  times.sort((a, b) => a - b)
  console.log(grouped ? "grouped" : "plain", `claim of ${limit} ms: p50`, times[Math.floor(rounds / 2)].toFixed(2), "min", times[0].toFixed(2), "max", times[rounds - 1].toFixed(2))
  for (const n of notices) console.log("----\n" + n.slice(0, Number(process.env.EXPLAIN_CHARS ?? 3000)))
  await c.end()
} finally {
  await admin.query(`DROP DATABASE ${name} WITH (FORCE)`); await admin.end()
}
