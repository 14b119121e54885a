/**
 * `npx tsx bench/group-drain-profile.ts grouped|plain [backlog] [groups] [drain] [log]`
 * (issue 36, docs/benchmarks.md "Groups (issue 36): a sequence's walk without
 * a seek per group"): where one G6 drain on PostgreSQL spends its time. The
 * table of bench/groups.ts G6 (`backlog` due items, default 1,000,000, in
 * `groups` ordered groups, default 100,000, or in none with `plain`), one
 * worker process of 10 slots draining `drain` (default 50,000): the drain's
 * rate, the worker process's CPU and the database backends' CPU per item,
 * the claim functions' times (track_functions, set on the database), the
 * database's row and block counts and each index's scans and blocks; with
 * `log`, each statement's total time from the server log (log_min_duration_statement
 * = 0 on the database; BENCH_PG_LOG, default /var/log/postgresql/postgresql-15-main.log,
 * readable by this user, with %d in log_line_prefix). Environment: BENCH_PG_URL.
 */
import { readFileSync, statSync } from "node:fs"
import { readdir, readFile } from "node:fs/promises"
import pg from "pg"
import { loadGroupSystem } from "./adapters/groups.js"
import { buildBacklog, SEQUENCE } from "./lib/groupWorkloads.js"
import { GroupWorkers } from "./lib/groupWorkers.js"
import { cpuDelta, dropTarget, freshTarget, serverCpuMs } from "./lib/stores.js"

const grouped = process.argv[2] !== "plain"
const backlog = Number(process.argv[3] ?? 1_000_000)
const groups = Number(process.argv[4] ?? 100_000)
const drain = Number(process.argv[5] ?? 50_000)
const logStatements = process.argv[6] === "log"
const env = { pgAdminUrl: process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres", redisUrl: "", redisDb: 0 }
const LOG = process.env.BENCH_PG_LOG ?? "/var/log/postgresql/postgresql-15-main.log"

const workerCpu = async (): Promise<number> => {
  let sum = 0
  for (const pid of (await readdir("/proc")).filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = (await readFile(`/proc/${pid}/cmdline`, "utf8")).replace(/\0/g, " ")
      if (!cmd.includes("groupChild.ts")) continue
      const stat = await readFile(`/proc/${pid}/stat`, "utf8")
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      sum += (Number(f[11]) + Number(f[12])) * 10
    } catch { /* gone */ }
  }
  return sum
}

const target = await freshTarget(env, "pg", `prof_${grouped ? "g" : "p"}`, "benchg")
if (target.store !== "pg") throw new Error("pg only")
const limit = grouped ? SEQUENCE : null
try {
  const client = await loadGroupSystem("docket").open(target, limit)
  await client.close()
  await buildBacklog(target, backlog, groups, grouped)
  const admin = new pg.Client({ connectionString: env.pgAdminUrl })
  await admin.connect()
  await admin.query(`ALTER DATABASE ${target.database} SET track_functions = 'all'`)
  if (logStatements) await admin.query(`ALTER DATABASE ${target.database} SET log_min_duration_statement = 0`)
  const db = new pg.Client({ connectionString: target.url })
  await db.connect()
  await db.query("SELECT pg_stat_reset()")
  const logFrom = logStatements ? statSync(LOG).size : 0
  const workers = await GroupWorkers.start(1, { system: "docket", target, concurrency: 10, limit, markFrom: Infinity })
  await workers.go()
  const s0 = await serverCpuMs(target), w0 = await workerCpu(), t0 = performance.now()
  await workers.waitFor(() => workers.done >= drain, 600_000, "drain")
  const t1 = performance.now(), s1 = await serverCpuMs(target), w1 = await workerCpu()
  const done = workers.done
  await workers.stop()
  if (logStatements) await admin.query(`ALTER DATABASE ${target.database} RESET log_min_duration_statement`)
  const wall = t1 - t0
  console.log(`${grouped ? "grouped" : "plain"}: ${done} items in ${wall.toFixed(0)} ms = ${(done / wall * 1000).toFixed(0)}/s;` +
    ` worker CPU ${(w1 - w0).toFixed(0)} ms (${((w1 - w0) / done * 1000).toFixed(1)} us/item), server CPU ${cpuDelta(s0, s1).toFixed(0)} ms (${(cpuDelta(s0, s1) / done * 1000).toFixed(1)} us/item)`)
  await new Promise((r) => setTimeout(r, 600))
  const f = await db.query("SELECT funcname, calls, total_time::numeric(12,1) AS total, self_time::numeric(12,1) AS self FROM pg_stat_user_functions ORDER BY total_time DESC")
  for (const r of f.rows) console.log(`  fn ${r.funcname}: calls ${r.calls}, total ${r.total} ms, self ${r.self} ms`)
  const d = await db.query("SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()")
  console.log("  db", JSON.stringify(d.rows[0]))
  const ix = await db.query("SELECT indexrelname, idx_scan, idx_tup_read, idx_blks_hit + idx_blks_read AS blks FROM pg_stat_user_indexes JOIN pg_statio_user_indexes USING (indexrelid, relid, schemaname, relname, indexrelname) WHERE relname = 'docket_items' ORDER BY 4 DESC")
  for (const r of ix.rows) console.log(`  ix ${r.indexrelname}: scans ${r.idx_scan}, read ${r.idx_tup_read}, blocks ${r.blks}`)
  if (logStatements) {
    const text = readFileSync(LOG).subarray(logFrom).toString()
    const by = new Map<string, { n: number; ms: number }>()
    const re = new RegExp(`@${target.database} LOG:  duration: ([0-9.]+) ms  (?:statement|execute [^:]*): ([^\\n]*)`, "g")
    for (const m of text.matchAll(re)) {
      const key = m[2].replace(/\s+/g, " ").slice(0, 90)
      const e = by.get(key) ?? { n: 0, ms: 0 }
      e.n++
      e.ms += Number(m[1])
      by.set(key, e)
    }
    for (const [k, v] of [...by].sort((a, b) => b[1].ms - a[1].ms).slice(0, 12)) console.log(`  st ${v.n} x, ${v.ms.toFixed(0)} ms: ${k}`)
  }
  await db.end()
  await admin.end()
} finally {
  await dropTarget(env, target)
  const { closeAdmin } = await import("./lib/stores.js")
  await closeAdmin()
}
