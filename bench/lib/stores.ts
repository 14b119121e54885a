/**
 * Fresh stores for each run (a PostgreSQL database, a SQLite file in a temp
 * directory, a Redis key prefix) and the database-side measurements:
 * pg_stat_database deltas and connections per database.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import type { Target } from "../adapters/types.js"

export interface Env {
  /** An admin URL (any database; fresh databases are made beside it). */
  readonly pgAdminUrl: string
  readonly redisUrl: string
  readonly redisDb: number
}

const rand = () => Math.random().toString(36).slice(2, 8)

let admin: pg.Client | undefined

const adminClient = async (env: Env): Promise<pg.Client> => {
  if (admin === undefined) {
    const client = new pg.Client({ connectionString: env.pgAdminUrl, application_name: "bench-admin" })
    await client.connect()
    admin = client
  }
  return admin
}

export const closeAdmin = async () => {
  const client = admin
  admin = undefined
  await client?.end()
}

export const pgReachable = async (env: Env): Promise<string | undefined> => {
  try {
    await (await adminClient(env)).query("select 1")
    return undefined
  } catch (error) {
    return String(error)
  }
}

/**
 * Diagnostics only: server settings for every fresh database, from
 * `BENCH_PG_SET` ("name=value,name=value", e.g. "jit=off"). Unset in the published runs.
 */
export const pgSettings = (): Array<readonly [string, string]> =>
  (process.env.BENCH_PG_SET ?? "").split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    const m = /^([a-z_][a-z0-9_.]*)\s*=\s*([A-Za-z0-9_.\- ]+)$/i.exec(s)
    if (m === null) throw new Error(`BENCH_PG_SET: cannot read ${JSON.stringify(s)} (name=value)`)
    return [m[1], `'${m[2].trim()}'`] as const
  })

/** A new, empty store; a PostgreSQL database is named `<prefix>_<name>_<pid>_<random>`. */
export const freshTarget = async (env: Env, store: Target["store"], name: string, prefix = "bench"): Promise<Target> => {
  switch (store) {
    case "pg": {
      const database = `${prefix}_${name.replace(/\W/g, "_")}_${process.pid}_${rand()}`
      const admin = await adminClient(env)
      await admin.query(`CREATE DATABASE ${database}`)
      for (const [name, value] of pgSettings()) await admin.query(`ALTER DATABASE ${database} SET ${name} = ${value}`)
      const url = new URL(env.pgAdminUrl)
      url.pathname = `/${database}`
      return { store: "pg", url: url.toString(), database }
    }
    case "sqlite": {
      const dir = mkdtempSync(join(tmpdir(), `bench-${name}-`))
      return { store: "sqlite", file: join(dir, "queue.db") }
    }
    case "redis":
      return { store: "redis", url: env.redisUrl, db: env.redisDb, prefix: `bench-${process.pid}-${rand()}` }
  }
}

export const dropTarget = async (env: Env, target: Target): Promise<void> => {
  switch (target.store) {
    case "pg":
      await (await adminClient(env)).query(`DROP DATABASE IF EXISTS ${target.database} WITH (FORCE)`)
      return
    case "sqlite":
      rmSync(join(target.file, ".."), { recursive: true, force: true })
      return
    case "redis": {
      const { removeQueue } = await import("../adapters/bullmq.js")
      await removeQueue(target)
    }
  }
}

export interface DbCounters {
  readonly xacts: number
  readonly inserted: number
  readonly updated: number
  readonly deleted: number
}

/** This database's counters in pg_stat_database (read from the admin connection, so not counted in them). */
export const pgCounters = async (env: Env, database: string): Promise<DbCounters> => {
  const client = await adminClient(env)
  await client.query("select pg_stat_clear_snapshot()")
  const { rows } = await client.query(
    `select xact_commit + xact_rollback as xacts, tup_inserted, tup_updated, tup_deleted
     from pg_stat_database where datname = $1`,
    [database]
  )
  const row = rows[0] ?? {}
  return {
    xacts: Number(row.xacts ?? 0),
    inserted: Number(row.tup_inserted ?? 0),
    updated: Number(row.tup_updated ?? 0),
    deleted: Number(row.tup_deleted ?? 0)
  }
}

/** Connections open to the database now. */
export const pgConnections = async (env: Env, database: string): Promise<number> => {
  const { rows } = await (await adminClient(env)).query(
    "select count(*)::int as n from pg_stat_activity where datname = $1",
    [database]
  )
  return rows[0].n
}

/**
 * Waits until no connection to the database is left: a backend flushes its
 * statistics when it exits, so counters read after this are complete.
 */
export const waitNoConnections = async (env: Env, database: string, timeoutMs = 10_000): Promise<void> => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    if ((await pgConnections(env, database)) === 0) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Whether pg_stat_statements is loaded (it needs shared_preload_libraries). */
export const pgStatStatementsLoaded = async (env: Env): Promise<boolean> => {
  const { rows } = await (await adminClient(env)).query("show shared_preload_libraries")
  return String(rows[0]?.shared_preload_libraries ?? "").includes("pg_stat_statements")
}

export const pgServerVersion = async (env: Env): Promise<string> => {
  const { rows } = await (await adminClient(env)).query("show server_version")
  return String(rows[0]?.server_version ?? "?")
}

/**
 * CPU time (ms) so far of the server processes serving this store: the
 * PostgreSQL backends connected to the database (matched by their process
 * title), or the Redis server. Read from /proc; undefined elsewhere.
 */
export const serverCpuMs = async (target: Target): Promise<Map<number, number> | undefined> => {
  if (target.store === "sqlite") return undefined
  const { readdir, readFile } = await import("node:fs/promises")
  let pids: Array<string>
  try {
    pids = (await readdir("/proc")).filter((p) => /^\d+$/.test(p))
  } catch {
    return undefined
  }
  const tick = 1000 / 100 // USER_HZ is 100 on Linux
  const out = new Map<number, number>()
  for (const pid of pids) {
    try {
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, "utf8")).replace(/\0/g, " ")
      const match = target.store === "pg"
        ? cmdline.startsWith("postgres: ") && cmdline.includes(` ${target.database} `)
        : cmdline.includes("redis-server")
      if (!match) continue
      const stat = await readFile(`/proc/${pid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      // utime and stime are fields 14 and 15 of stat; after the command they are at 11 and 12.
      out.set(Number(pid), (Number(fields[11]) + Number(fields[12])) * tick)
    } catch { /* the process ended */ }
  }
  return out
}

/** CPU used between two readings (processes new in the second count whole). */
export const cpuDelta = (before: Map<number, number> | undefined, after: Map<number, number> | undefined): number =>
  after === undefined ? NaN : [...after].reduce((sum, [pid, ms]) => sum + ms - (before?.get(pid) ?? 0), 0)
