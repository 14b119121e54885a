/**
 * `npx tsx bench/limits.ts`: what this machine's stores do by themselves, with
 * no queue on top: the ceilings the benchmark's figures sit under
 * (docs/benchmarks.md, "Physical limits of this machine").
 *
 * PostgreSQL (plain `pg` clients, a fresh database, dropped after):
 * - sequential round trips/s: `SELECT 1` awaited one after another on one connection;
 * - commits/s: a one-row autocommit INSERT (one statement, one transaction,
 *   one WAL flush at the server's synchronous_commit) awaited one after another,
 *   on 1 connection, then on 2 and 10 connections at once (their sum: group commit);
 * - bulk rows/s: small rows through multi-row INSERTs (`unnest` of arrays,
 *   5,000 rows a statement), and `INSERT ... SELECT generate_series` (no client).
 * SQLite (better-sqlite3, a temp file): one-row transactions (BEGIN, INSERT,
 * COMMIT) in WAL with Docket's pragmas (busy_timeout 10000, synchronous FULL,
 * foreign_keys ON), and with synchronous NORMAL for reference.
 *
 * Each figure is the median of `--repeat` runs (default 3). Flags: --repeat n,
 * --scale x (multiplies every count; default 1). Environment: BENCH_PG_URL.
 */
import Database from "better-sqlite3"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { median } from "./lib/stats.js"

const args = process.argv.slice(2)
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(name)
  return i >= 0 ? Number(args[i + 1]) : fallback
}
const repeat = flag("--repeat", 3)
const scale = flag("--scale", 1)
const count = (n: number) => Math.max(1, Math.round(n * scale))
const adminUrl = process.env.BENCH_PG_URL ?? process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"

interface Row {
  readonly what: string
  readonly unit: string
  readonly runs: Array<number>
}

const rows: Array<Row> = []
const measure = async (what: string, unit: string, once: () => Promise<number>) => {
  const runs: Array<number> = []
  for (let r = 0; r < repeat; r++) runs.push(await once())
  rows.push({ what, unit, runs })
  console.error(`${what}: ${Math.round(median(runs)).toLocaleString("en-US")} ${unit}`)
}

/** Per second, of `n` things done in `ms`. */
const rate = (n: number, ms: number) => n / (ms / 1000)

const connect = async (url: string) => {
  const client = new pg.Client({ connectionString: url, application_name: "bench-limits" })
  await client.connect()
  return client
}

const postgres = async () => {
  const admin = await connect(adminUrl)
  const database = `bench_limits_${process.pid}`
  await admin.query(`CREATE DATABASE ${database}`)
  const url = new URL(adminUrl)
  url.pathname = `/${database}`
  const settings: Record<string, string> = {}
  try {
    const c = await connect(url.toString())
    for (const s of ["server_version", "synchronous_commit", "fsync", "wal_sync_method", "commit_delay", "shared_buffers"]) {
      settings[s] = String((await c.query(`SHOW ${s}`)).rows[0][s])
    }
    await c.query("CREATE TABLE t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v integer NOT NULL, s text NOT NULL)")

    const trips = count(5000)
    await measure("PostgreSQL: sequential round trips (SELECT 1, 1 connection)", "round trips/s", async () => {
      const t0 = performance.now()
      for (let i = 0; i < trips; i++) await c.query("SELECT 1")
      return rate(trips, performance.now() - t0)
    })

    const commits = count(2000)
    const insertLoop = async (client: pg.Client, n: number) => {
      for (let i = 0; i < n; i++) await client.query("INSERT INTO t (v, s) VALUES ($1, 'x')", [i])
    }
    await measure("PostgreSQL: commits, one-row autocommit INSERT, 1 connection", "commits/s", async () => {
      const t0 = performance.now()
      await insertLoop(c, commits)
      return rate(commits, performance.now() - t0)
    })
    for (const k of [2, 10]) {
      const clients = await Promise.all(Array.from({ length: k }, () => connect(url.toString())))
      try {
        const each = Math.max(1, Math.round(commits / 2))
        await measure(`PostgreSQL: commits, one-row autocommit INSERT, ${k} connections at once (sum)`, "commits/s", async () => {
          const t0 = performance.now()
          await Promise.all(clients.map((client) => insertLoop(client, each)))
          return rate(each * k, performance.now() - t0)
        })
      } finally {
        await Promise.all(clients.map((client) => client.end()))
      }
    }

    const bulk = count(200_000)
    const batch = 5000
    await measure(`PostgreSQL: bulk insert, multi-row INSERT (unnest, ${batch.toLocaleString("en-US")} rows a statement)`, "rows/s", async () => {
      const v = Array.from({ length: batch }, (_, i) => i)
      const s = v.map(() => "{\"i\":1,\"t\":0}")
      const t0 = performance.now()
      for (let done = 0; done < bulk; done += batch) {
        await c.query("INSERT INTO t (v, s) SELECT * FROM unnest($1::int[], $2::text[])", [v, s])
      }
      return rate(Math.ceil(bulk / batch) * batch, performance.now() - t0)
    })
    await measure("PostgreSQL: bulk insert, INSERT ... SELECT generate_series (server only)", "rows/s", async () => {
      const t0 = performance.now()
      await c.query("INSERT INTO t (v, s) SELECT g, '{\"i\":1,\"t\":0}' FROM generate_series(1, $1::int) g", [bulk])
      return rate(bulk, performance.now() - t0)
    })
    await c.end()
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await admin.end()
  }
  return settings
}

const sqlite = async () => {
  const dir = mkdtempSync(join(tmpdir(), "bench-limits-"))
  try {
    for (const synchronous of ["FULL", "NORMAL"]) {
      const db = new Database(join(dir, `limits-${synchronous}.db`))
      db.pragma("journal_mode = WAL")
      db.pragma("busy_timeout = 10000")
      db.pragma(`synchronous = ${synchronous}`)
      db.pragma("foreign_keys = ON")
      db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v INTEGER NOT NULL, s TEXT NOT NULL)")
      const insert = db.prepare("INSERT INTO t (v, s) VALUES (?, 'x')")
      const begin = db.prepare("BEGIN IMMEDIATE")
      const commit = db.prepare("COMMIT")
      const n = count(synchronous === "FULL" ? 2000 : 20_000)
      const label = synchronous === "FULL" ? "Docket's default" : "sqliteSynchronous: \"normal\""
      await measure(`SQLite: commits, one-row transaction (WAL, synchronous ${synchronous}: ${label})`, "commits/s", async () => {
        const t0 = performance.now()
        for (let i = 0; i < n; i++) {
          begin.run()
          insert.run(i)
          commit.run()
        }
        return rate(n, performance.now() - t0)
      })
      db.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const main = async () => {
  const load0 = loadavg().map((l) => l.toFixed(2)).join(", ")
  const settings = await postgres()
  await sqlite()
  const fmt = (x: number) => Math.round(x).toLocaleString("en-US")
  console.log(
    `Machine: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), load average at start ${load0}, at the end ${
      loadavg().map((l) => l.toFixed(2)).join(", ")
    }; Node ${process.version}; PostgreSQL ${settings.server_version} (synchronous_commit ${settings.synchronous_commit}, ` +
      `fsync ${settings.fsync}, wal_sync_method ${settings.wal_sync_method}, commit_delay ${settings.commit_delay}, ` +
      `shared_buffers ${settings.shared_buffers}); SQLite ${new Database(":memory:").prepare("SELECT sqlite_version() AS v").pluck().get()}. ` +
      `Median of ${repeat} runs (min–max).\n`
  )
  console.log("| What | Median | Range | Unit |")
  console.log("| --- | ---: | ---: | --- |")
  for (const r of rows) {
    console.log(`| ${r.what} | ${fmt(median(r.runs))} | ${fmt(Math.min(...r.runs))}–${fmt(Math.max(...r.runs))} | ${r.unit} |`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
