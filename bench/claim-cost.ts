/**
 * `npx tsx bench/claim-cost.ts [--against <checkout> ...] [--rounds n] [--jobs n] [--batch n]`:
 * the store's own CPU for W2's two hot statements, the claim and the kept
 * completion, per 1,000 ungrouped jobs, for this checkout and (with
 * --against, repeatable) others, in alternating rounds (docs/benchmarks.md,
 * "Groups (issue 36)"). Each checkout's statement texts are imported from its
 * own src/internal/sql/claimAcquire.ts and claimComplete.ts, and its database
 * made by its own `docket migrate`, so a change to a statement, a function or
 * an index shows up here.
 *
 * Why: W2's throughput on this 2-core machine, shared with other work, moves
 * by 20-30% from run to run, so a cost of a few percent cannot be seen in it;
 * CPU time spent per job is much steadier. PostgreSQL: the backend's CPU from
 * /proc/<pid>/stat (so the server must run on this machine), 10 ms ticks,
 * summed over the round. SQLite: this process's CPU around each statement
 * (better-sqlite3 is synchronous). Each round fills the items table afresh
 * (ungrouped, one kind, due), then claims `--batch` at a time and completes
 * each batch (retention kept, as the default) until it is empty.
 * Environment: BENCH_PG_URL (an admin URL; default the local server).
 */
import Database from "better-sqlite3"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import pg from "pg"
import { median } from "./lib/stats.js"

const args = process.argv.slice(2)
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const rounds = Number(flag("--rounds") ?? 5)
const jobs = Number(flag("--jobs") ?? 60_000)
const batch = Number(flag("--batch") ?? 3_000)
// --against may be given more than once.
const against = args.flatMap((a, i) => (a === "--against" && args[i + 1] !== undefined ? [resolve(args[i + 1])] : []))
const checkouts = [resolve("."), ...against]
const adminUrl = process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"

interface Texts {
  readonly pgClaim: string
  readonly pgKeep: string
  readonly sqliteClaim: string
  readonly sqliteKeep: string
}

const textsOf = async (dir: string): Promise<Texts> => {
  const claim = await import(join(dir, "src/internal/sql/claimAcquire.ts"))
  const complete = await import(join(dir, "src/internal/sql/claimComplete.ts"))
  return { pgClaim: claim.pg, pgKeep: complete.pgKeep, sqliteClaim: claim.sqlite, sqliteKeep: complete.sqliteKeep }
}

const migrate = (dir: string, database: string) =>
  void execFileSync(process.execPath, [join(dir, "bin/docket.mjs"), "migrate", "--database", database], { stdio: "ignore" })

const FILL = `INSERT INTO docket_items (kind, payload, priority, run_at, created_at, updated_at)`
const fillPg = `${FILL} SELECT 'k', '{}', 0, 0, 0, 0 FROM generate_series(1, $1::int)`
const fillSqlite = `${FILL} WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?1)
  SELECT 'k', '{}', 0, 0, 0, 0 FROM s`

interface Held {
  readonly id: string | number | null
  readonly lease_seq: string | number
}
const pgArray = (values: ReadonlyArray<string | number>) => `{${values.join(",")}}`

/** One PostgreSQL round: CPU ms of the backend for the claims and for the completions. */
const pgRound = async (url: string, t: Texts): Promise<[number, number]> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid
    const ticks = () => {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
      return (Number(fields[11]) + Number(fields[12])) * 10
    }
    await client.query("TRUNCATE docket_items, docket_done")
    await client.query(fillPg, [jobs])
    await client.query("VACUUM ANALYZE docket_items")
    let claimMs = 0
    let keepMs = 0
    for (;;) {
      const t0 = ticks()
      const held = (await client.query<Held>(t.pgClaim, ["w", batch, 60_000, null, batch, null, null, null, null]))
        .rows.filter((r) => r.id !== null)
      const t1 = ticks()
      if (held.length === 0) break
      // By id, as the store sends a batch (src/internal/sql/held.ts), and
      // every claim must be completed: a completion that missed rows would cost less.
      held.sort((a, b) => Number(a.id) - Number(b.id))
      const done = await client.query(t.pgKeep, [pgArray(held.map((r) => r.id!)), pgArray(held.map((r) => r.lease_seq)), null])
      if (done.rowCount !== held.length) throw new Error(`completed ${done.rowCount} of ${held.length}`)
      claimMs += t1 - t0
      keepMs += ticks() - t1
    }
    return [claimMs, keepMs]
  } finally {
    await client.end()
  }
}

/** One SQLite round: this process's CPU ms for the claims and for the completions. */
const sqliteRound = (file: string, t: Texts): [number, number] => {
  const db = new Database(file)
  try {
    db.pragma("journal_mode = WAL")
    db.pragma("synchronous = NORMAL")
    db.exec("DELETE FROM docket_items")
    db.prepare(fillSqlite).run({ 1: jobs })
    const claim = db.prepare(t.sqliteClaim)
    const keep = db.prepare(t.sqliteKeep)
    const cpu = () => {
      const u = process.cpuUsage()
      return (u.user + u.system) / 1000
    }
    let claimMs = 0
    let keepMs = 0
    for (;;) {
      const t0 = cpu()
      const held = claim.all({ 1: "w", 2: batch, 3: 60_000, 4: null, 5: 1 }) as Array<Held>
      const t1 = cpu()
      if (held.length === 0) break
      const done = keep.all({ 1: JSON.stringify(held.map((r) => [r.id, r.lease_seq, null])) })
      if (done.length !== held.length) throw new Error(`completed ${done.length} of ${held.length}`)
      claimMs += t1 - t0
      keepMs += cpu() - t1
    }
    return [claimMs, keepMs]
  } finally {
    db.close()
  }
}

const main = async () => {
  const texts = await Promise.all(checkouts.map(textsOf))
  const dir = mkdtempSync(join(tmpdir(), "claim-cost-"))
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  const names = checkouts.map((_, i) => `claim_cost_${process.pid}_${i}`)
  const urls = names.map((n) => Object.assign(new URL(adminUrl), { pathname: `/${n}` }).toString())
  const files = checkouts.map((_, i) => join(dir, `${i}.db`))
  const runs = checkouts.map(() => ({ pgClaim: [] as Array<number>, pgKeep: [] as Array<number>, sqClaim: [] as Array<number>, sqKeep: [] as Array<number> }))
  try {
    for (const [i, c] of checkouts.entries()) {
      await admin.query(`CREATE DATABASE ${names[i]}`)
      migrate(c, urls[i])
      migrate(c, files[i])
    }
    for (let r = 0; r < rounds; r++) {
      for (const i of checkouts.keys()) {
        const [pc, pk] = await pgRound(urls[i], texts[i])
        const [sc, sk] = sqliteRound(files[i], texts[i])
        const per = (ms: number) => (ms / jobs) * 1000
        runs[i].pgClaim.push(per(pc)), runs[i].pgKeep.push(per(pk)), runs[i].sqClaim.push(per(sc)), runs[i].sqKeep.push(per(sk))
      }
    }
  } finally {
    for (const n of names) await admin.query(`DROP DATABASE IF EXISTS ${n}`)
    await admin.end()
    rmSync(dir, { recursive: true, force: true })
  }
  const fmt = (xs: ReadonlyArray<number>) => median(xs).toFixed(2)
  console.log(`CPU ms per 1,000 jobs, medians of ${rounds} rounds (${jobs} jobs, batches of ${batch}):`)
  console.log("| checkout | PG claim | PG complete | SQLite claim | SQLite complete |")
  console.log("|---|---:|---:|---:|---:|")
  for (const [i, c] of checkouts.entries()) {
    const x = runs[i]
    console.log(`| ${c} | ${fmt(x.pgClaim)} | ${fmt(x.pgKeep)} | ${fmt(x.sqClaim)} | ${fmt(x.sqKeep)} |`)
  }
}

await main()
