/**
 * PostgreSQL clusters of a test's own, for what the shared server cannot
 * show or must not suffer: a restart or a crash (the reliability suite),
 * settings that need one (max_connections, max_prepared_transactions), a
 * streaming standby on a replication slot, synchronous or not, and its
 * promotion (the failover scenario, test/reliability/failover.ts).
 *
 * Each cluster lives in a temporary directory, listens on a free port of
 * 127.0.0.1 (and a socket in that directory) with trust authentication for
 * the superuser `root`, and is stopped and removed by `destroy`. initdb
 * refuses to run as root, and tests run as root here: the binaries then run
 * as the `postgres` user (runuser), in a directory it owns. The binaries:
 * DOCKET_TEST_PG_BIN, else the newest under /usr/lib/postgresql, else
 * pg_config's. Outside CI a machine without them skips the tests that check
 * `clusterAvailable`; with CI=true it fails them.
 */
import { execFile, execFileSync } from "node:child_process"
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import pg from "pg"
import { IN_CI, withClient } from "./db.js"

const execFileAsync = promisify(execFile)

/** The newest PostgreSQL server binaries on this machine (DOCKET_TEST_PG_BIN, Debian's layout, else pg_config's). */
const pgBinDir = (): string | undefined => {
  const given = process.env.DOCKET_TEST_PG_BIN
  if (given !== undefined && given !== "") return existsSync(join(given, "initdb")) ? given : undefined
  const base = "/usr/lib/postgresql"
  if (existsSync(base)) {
    const versions = readdirSync(base).filter((v) => existsSync(join(base, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a))
    if (versions.length > 0) return join(base, versions[0], "bin")
  }
  try {
    const pgConfig = execFileSync("pg_config", ["--bindir"], { encoding: "utf8" }).trim()
    return existsSync(join(pgConfig, "initdb")) ? pgConfig : undefined
  } catch {
    return undefined
  }
}

const PG_BIN = pgBinDir()

/** Whether clusters can be made here (outside CI, a warning when not; in CI, a failure). */
export const clusterAvailable: boolean = (() => {
  if (PG_BIN !== undefined) return true
  if (IN_CI) throw new Error("PostgreSQL's server binaries (initdb, pg_ctl) are required in CI: none found (DOCKET_TEST_PG_BIN)")
  console.warn("tests on PostgreSQL clusters of their own skipped: no initdb found (set DOCKET_TEST_PG_BIN)")
  return false
})()

const asRoot = process.getuid?.() === 0

/** Runs one of PostgreSQL's binaries (as `postgres` when root) in `cwd`, asynchronously (the test's clients keep running). */
const runBin = async (tool: string, args: ReadonlyArray<string>, cwd: string): Promise<void> => {
  if (PG_BIN === undefined) throw new Error("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
  const command = join(PG_BIN, tool)
  const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", command, ...args]] : [command, [...args]]
  await execFileAsync(file, argv, { cwd, timeout: 120_000 })
}

/** A free TCP port on 127.0.0.1 (free when asked: the cluster takes it right after). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** A temporary directory the binaries may write in. */
const ownDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "docket-pg-"))
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim())
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())
    chownSync(dir, uid, gid)
  }
  return dir
}

/** Settings of postgresql.conf. */
export type Settings = Readonly<Record<string, string | number>>

// Appended to postgresql.conf: later lines win over the file's own (and a base backup's copy of its primary's).
const configure = (data: string, settings: Settings) =>
  appendFileSync(
    join(data, "postgresql.conf"),
    Object.entries(settings).map(([k, v]) => `${k} = ${typeof v === "number" ? v : `'${v.replace(/'/g, "''")}'`}\n`).join("")
  )

/** A running cluster of a test's own. */
export interface Cluster {
  readonly port: number
  /** postgres://root@127.0.0.1:<port>/postgres */
  readonly adminUrl: string
  /** A URL of one of its databases (default postgres), as the superuser `root`. */
  readonly url: (database?: string) => string
  /** Runs `f` on a connection of its own to `database` (default postgres), closed after. */
  readonly query: <A>(f: (client: pg.Client) => Promise<A>, database?: string) => Promise<A>
  readonly start: () => Promise<void>
  /** Stops the server: "fast" (clean) or "immediate" (as if it crashed: WAL replayed at the next start). */
  readonly stop: (mode: "fast" | "immediate") => Promise<void>
  /**
   * Promotes a standby to a primary (`pg_ctl promote -w`: returns once it
   * accepts writes); fails on a server that is no standby.
   */
  readonly promote: () => Promise<void>
  /**
   * Sets `settings` with ALTER SYSTEM (postgresql.auto.conf, over every
   * other file) and reloads the configuration: for the settings a reload
   * applies (synchronous_standby_names, primary_conninfo, ...).
   */
  readonly reconfigure: (settings: Settings) => Promise<void>
  /** Stops it at once and removes its directory. */
  readonly destroy: () => Promise<void>
}

// Starts the cluster in `dir`/data, configured already, and gives it.
const started = async (dir: string, port: number): Promise<Cluster> => {
  const data = join(dir, "data")
  const start = () => runBin("pg_ctl", ["-D", data, "-l", join(dir, "server.log"), "-w", "-t", "60", "start"], dir)
  const stop = (mode: "fast" | "immediate") => runBin("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"], dir)
  const promote = () => runBin("pg_ctl", ["-D", data, "-w", "-t", "60", "promote"], dir)
  try {
    await start()
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
  const url = (database = "postgres") => `postgres://root@127.0.0.1:${port}/${database}`
  const query = <A>(f: (client: pg.Client) => Promise<A>, database?: string): Promise<A> => withClient(url(database), f)
  return {
    port,
    adminUrl: url(),
    url,
    query,
    start,
    stop,
    promote,
    reconfigure: (settings) =>
      query(async (c) => {
        for (const [name, value] of Object.entries(settings)) {
          // A setting's name cannot be a parameter: only plain names are taken.
          if (!/^[a-z_]+$/.test(name)) throw new Error(`not a setting's name: ${name}`)
          await c.query(`ALTER SYSTEM SET ${name} = ${c.escapeLiteral(String(value))}`)
        }
        await c.query("SELECT pg_reload_conf()")
      }),
    destroy: async () => {
      await stop("immediate").catch(() => undefined)
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** How `privateCluster` configures its server. */
export interface ClusterOptions {
  /** The server's `max_connections` (default 200; superuser_reserved_connections stays 3). */
  readonly maxConnections?: number
  /** Other settings of its postgresql.conf (max_prepared_transactions, ...). */
  readonly settings?: Settings
}

/**
 * A PostgreSQL cluster of this test's own (initdb into a temporary folder, a
 * free port), started: restarting it disturbs no other test. Throws when the
 * server binaries are missing or the cluster cannot start.
 */
export const privateCluster = async (options: ClusterOptions = {}): Promise<Cluster> => {
  const dir = ownDir()
  const port = await freePort()
  await runBin("initdb", ["-D", join(dir, "data"), "-A", "trust", "-U", "root", "--no-sync", "-E", "UTF8", "--locale=C"], dir)
  // initdb's pg_hba.conf lets 127.0.0.1 connect, replication included, with trust as -A says.
  configure(join(dir, "data"), {
    port,
    listen_addresses: "127.0.0.1",
    unix_socket_directories: dir,
    fsync: "off",
    max_connections: options.maxConnections ?? 200,
    ...options.settings
  })
  return started(dir, port)
}

/**
 * A streaming standby of `primary` on a physical replication slot of its
 * own (`slot`, made by pg_basebackup -C), with `settings` (say
 * hot_standby_feedback): started, and streaming once this returns. The base
 * backup asks for a fast checkpoint (a spread one took 90 s here).
 *
 * Its WAL receiver connects as application_name `slot`: the name the
 * primary's synchronous_standby_names takes to make it synchronous
 * (`synchronous`). It is asynchronous otherwise.
 */
export const privateStandby = async (primary: Cluster, slot: string, settings: Settings = {}): Promise<Cluster> => {
  const dir = ownDir()
  const port = await freePort()
  await runBin(
    "pg_basebackup",
    ["-h", "127.0.0.1", "-p", String(primary.port), "-U", "root", "-D", join(dir, "data"), "-R", "-S", slot, "-C",
      "-X", "stream", "-c", "fast", "--no-sync"],
    dir
  )
  configure(join(dir, "data"), { port, unix_socket_directories: dir, ...settings })
  nameReceiver(join(dir, "data"), slot)
  const standby = await started(dir, port)
  const deadline = Date.now() + 30_000
  for (;;) {
    const streaming = await primary.query((c) =>
      c.query(
        `SELECT 1 FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
         WHERE s.slot_name = $1 AND r.state = 'streaming'`,
        [slot]
      )
    )
    if (streaming.rowCount === 1) return standby
    if (Date.now() > deadline) {
      await standby.destroy()
      throw new Error(`the standby on slot ${slot} did not stream within 30 s`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}

// pg_basebackup -R writes primary_conninfo into postgresql.auto.conf (read
// last, so it wins): the receiver's application_name goes in that line (in
// every such line: a backup of a promoted standby also carries the one it had,
// before its own, which wins).
const nameReceiver = (data: string, name: string) => {
  const file = join(data, "postgresql.auto.conf")
  const text = readFileSync(file, "utf8")
  const named = text.replace(/^primary_conninfo = '/gm, `primary_conninfo = 'application_name=${name} `)
  if (named === text) throw new Error(`no primary_conninfo in ${file}`)
  writeFileSync(file, named)
}

/**
 * Makes `standby` (made by privateStandby on `slot`) the synchronous standby
 * of `primary`: a commit there returns once the standby has flushed its WAL
 * (synchronous_commit's default, on). Set on the primary only, after the base
 * backup: a promoted standby that named itself would wait for ever. Returns
 * once the primary reports the standby as sync.
 */
export const makeSynchronous = async (primary: Cluster, slot: string): Promise<void> => {
  await primary.reconfigure({ synchronous_standby_names: `"${slot}"` })
  const deadline = Date.now() + 30_000
  for (;;) {
    const sync = await primary.query((c) =>
      c.query("SELECT 1 FROM pg_stat_replication WHERE application_name = $1 AND sync_state = 'sync'", [slot])
    )
    if (sync.rowCount === 1) return
    if (Date.now() > deadline) throw new Error(`the standby ${slot} did not become synchronous within 30 s`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
