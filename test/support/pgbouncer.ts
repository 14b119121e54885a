/**
 * PgBouncer processes of a test's own, in front of the test server
 * (DOCKET_TEST_PG_URL's host and port): one process per pool mode, on a free
 * port of 127.0.0.1, configured in a temporary directory, stopped by `stop`.
 *
 * Every database name is forwarded as it is (`* = host=... port=...`), so one
 * pooler serves the fresh databases a test makes; clients log in as the test
 * server's user with no password (`auth_type = trust`, the user listed in the
 * auth file, as PgBouncer wants even then), and PgBouncer logs in to
 * PostgreSQL as that user (trust authentication on loopback, as the test
 * server is set up). PgBouncer refuses to run as root: tests run as root here,
 * so it is started as the `postgres` user (`spawn`'s uid and gid, so the
 * child is PgBouncer itself and a signal reaches it), on files it can read.
 *
 * The binary: DOCKET_PGBOUNCER, else /usr/sbin/pgbouncer (Debian's package,
 * which .ci/run installs), else `pgbouncer` on the PATH. Outside CI a machine
 * without one skips the tests that check `pgbouncerAvailable`; with CI=true it
 * fails them.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { freePort } from "./cluster.js"
import { IN_CI, PG_ADMIN_URL } from "./db.js"

const binary = (): string | undefined => {
  const given = process.env.DOCKET_PGBOUNCER
  if (given !== undefined && given !== "") return existsSync(given) ? given : undefined
  if (existsSync("/usr/sbin/pgbouncer")) return "/usr/sbin/pgbouncer"
  try {
    return execFileSync("sh", ["-c", "command -v pgbouncer"], { encoding: "utf8" }).trim() || undefined
  } catch {
    return undefined
  }
}

const PGBOUNCER = binary()

/** Whether PgBouncer can be started here (outside CI, a warning when not; in CI, a failure). */
export const pgbouncerAvailable: boolean = (() => {
  if (PGBOUNCER !== undefined) return true
  if (IN_CI) throw new Error("PgBouncer is required in CI and was not found (apt-get install pgbouncer, or DOCKET_PGBOUNCER)")
  console.warn("PgBouncer tests skipped: no pgbouncer found (apt-get install pgbouncer, or set DOCKET_PGBOUNCER)")
  return false
})()

/** How PgBouncer hands out server connections: for a client's whole session, or for one transaction at a time. */
export type PoolMode = "session" | "transaction"

/** A running PgBouncer of a test's own. */
export interface PgBouncer {
  readonly mode: PoolMode
  readonly port: number
  /** The URL of `direct` (a URL of the test server) through this pooler: the same user and database, its port. */
  readonly through: (direct: string) => string
  /** PgBouncer's own log so far (its warnings: say, notifications it dropped). */
  readonly log: () => string
  /** The client connections it holds now (its admin console's SHOW CLIENTS): database and application name. */
  readonly clients: () => Promise<ReadonlyArray<{ readonly database: string; readonly application: string }>>
  /** Stops it (SIGTERM: at once, clients cut off) and removes its directory. */
  readonly stop: () => Promise<void>
  /** The same without waiting for it to exit (for a process's exit handler). */
  readonly kill: () => void
}

const asRoot = process.getuid?.() === 0
const postgresIds = (): { uid: number; gid: number } => ({
  uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()),
  gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())
})

/** Waits until PgBouncer answers a statement (it forwards it to the server), or throws after `ms`. */
const accepting = async (url: string, child: ChildProcess, said: () => string, ms: number) => {
  const deadline = Date.now() + ms
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`pgbouncer exited (${child.exitCode ?? child.signalCode}) at start:\n${said()}`)
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
    client.on("error", () => {})
    try {
      await client.connect()
      await client.query("SELECT 1")
      return
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`pgbouncer did not accept within ${ms} ms: ${String(error)}\n${said()}`)
      await new Promise((r) => setTimeout(r, 50))
    } finally {
      await client.end().catch(() => undefined)
    }
  }
}

const readLog = (file: string) => (existsSync(file) ? readFileSync(file, "utf8") : "")

/**
 * Starts a PgBouncer in `mode` in front of `server` (a URL of the server: its
 * host, port and user; default the test server), accepting once this
 * returns. `settings` are added to its [pgbouncer] section.
 */
export const startPgBouncer = async (
  mode: PoolMode,
  settings: Readonly<Record<string, string | number>> = {},
  serverUrl: string = PG_ADMIN_URL
): Promise<PgBouncer> => {
  if (PGBOUNCER === undefined) throw new Error("no pgbouncer on this machine")
  const server = new URL(serverUrl)
  const user = decodeURIComponent(server.username || "root")
  const dir = mkdtempSync(join(tmpdir(), "docket-pgbouncer-"))
  const port = await freePort()
  const logFile = join(dir, "pgbouncer.log")
  const ini = join(dir, "pgbouncer.ini")
  const lines = [
    "[databases]",
    `* = host=${server.hostname || "127.0.0.1"} port=${server.port || "5432"}`,
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    `admin_users = ${user}`,
    "auth_type = trust",
    `auth_file = ${join(dir, "users.txt")}`,
    `pool_mode = ${mode}`,
    `logfile = ${logFile}`,
    "max_client_conn = 500",
    "default_pool_size = 10",
    // A test makes a database (so a pool) per test: idle server connections
    // are closed soon, or the pools of finished tests would use up the
    // server's max_connections, which other test files share.
    "server_idle_timeout = 2",
    // Its databases are dropped WITH (FORCE) after the test, while the pooler may still know them.
    "server_login_retry = 1",
    ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`)
  ]
  writeFileSync(ini, lines.join("\n") + "\n")
  writeFileSync(join(dir, "users.txt"), `"${user}" ""\n`)
  const ids = asRoot ? postgresIds() : undefined
  if (ids !== undefined) for (const file of [dir, ini, join(dir, "users.txt")]) chownSync(file, ids.uid, ids.gid)
  const child = spawn(PGBOUNCER, [ini], { cwd: dir, stdio: ["ignore", "ignore", "pipe"], ...(ids ?? {}) })
  // What it says before its log file is open (a bad setting, say), for the error below.
  let early = ""
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    if (early.length < 10_000) early += d
  })
  let stopping = false
  const exited = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      // Said at once: every test after it fails with "connection refused", which does not say why.
      if (!stopping) console.error(`pgbouncer (${mode}) exited unexpectedly (${code ?? signal}):\n${readLog(logFile).slice(-4000)}`)
      resolve()
    }))
  child.on("error", () => {})
  const through = (direct: string) => {
    const url = new URL(direct)
    url.hostname = "127.0.0.1"
    url.port = String(port)
    return url.toString()
  }
  const stop = async () => {
    stopping = true
    if (child.exitCode === null && child.signalCode === null) {
      // SIGTERM is PgBouncer's immediate shutdown; SIGINT would wait for every transaction to end.
      child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000)
      await exited
      clearTimeout(timer)
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await accepting(through(serverUrl), child, () => early + readLog(logFile), 20_000)
  } catch (error) {
    await stop()
    throw error
  }
  // It must not keep its parent alive (the benchmark stops it at its exit).
  child.unref()
  ;(child.stderr as { unref?: () => void } | null)?.unref?.()
  const clients = async () => {
    const adminUrl = new URL(through(serverUrl))
    adminUrl.pathname = "/pgbouncer"
    const admin = new pg.Client({ connectionString: adminUrl.toString() })
    admin.on("error", () => {})
    await admin.connect()
    try {
      const { rows } = await admin.query<{ database: string; application_name: string }>("SHOW CLIENTS")
      return rows.map((r) => ({ database: r.database, application: r.application_name }))
    } finally {
      await admin.end().catch(() => undefined)
    }
  }
  const kill = () => {
    stopping = true
    child.kill("SIGTERM")
    rmSync(dir, { recursive: true, force: true })
  }
  return { mode, port, through, log: () => readLog(logFile), clients, stop, kill }
}
