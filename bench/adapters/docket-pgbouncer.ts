/**
 * Docket through PgBouncer in transaction pooling (docs/scaling.md,
 * "PgBouncer"), for W3 beside `docket-pg` (docs/benchmarks.md, "Through
 * PgBouncer"). Run only when named (`--only`). The enqueuer and the worker
 * both connect through one PgBouncer 1.18 (Debian's package) that this
 * (the parent) process starts on loopback in front of the benchmark's
 * server, transaction pooling, 10 server connections per database
 * (test/support/pgbouncer.ts); the worker processes find its port in
 * BENCH_PGBOUNCER_PORT, set before they are forked.
 *
 * - docket-pgbouncer: the worker's LISTEN connection on the database
 *   directly (`listenDatabase`), as the docs say to run it;
 * - docket-pgbouncer-poll: without it: the worker's probe finds LISTEN deaf
 *   behind the pooler, warns and goes on with the poll (2 s, the default).
 */
import { existsSync } from "node:fs"
import { execFileSync } from "node:child_process"
import { COUNT, type Connect, extraNote, openWith, startWorkerWith } from "./docket.js"
import { pgProbe } from "./probes.js"
import type { Contender, Target } from "./types.js"

const PORT_VARIABLE = "BENCH_PGBOUNCER_PORT"

const installed = (): boolean => {
  const given = process.env.DOCKET_PGBOUNCER
  if (given !== undefined && given !== "") return existsSync(given)
  if (existsSync("/usr/sbin/pgbouncer")) return true
  try {
    return execFileSync("sh", ["-c", "command -v pgbouncer"], { encoding: "utf8" }).trim() !== ""
  } catch {
    return false
  }
}

// The parent's PgBouncer, started by the first `open` and stopped when the process exits.
let started: Promise<void> | undefined
const ensurePooler = (target: Target): Promise<void> => {
  started ??= (async () => {
    const { startPgBouncer } = await import("../../test/support/pgbouncer.js")
    const bouncer = await startPgBouncer("transaction", {}, (target as Extract<Target, { store: "pg" }>).url)
    process.once("exit", () => bouncer.kill())
    process.env[PORT_VARIABLE] = String(bouncer.port)
  })()
  return started
}

const pooled = (target: Target): string => {
  const port = process.env[PORT_VARIABLE]
  if (port === undefined) throw new Error(`${PORT_VARIABLE} is not set: the parent's PgBouncer is not running`)
  const url = new URL((target as Extract<Target, { store: "pg" }>).url)
  url.hostname = "127.0.0.1"
  url.port = port
  return url.toString()
}

const contender = (options: {
  readonly name: string
  readonly label: string
  readonly config: string
  readonly connect: Connect
}): Contender => ({
  name: options.name,
  label: options.label,
  store: "pg",
  docket: true,
  workloads: ["W3"],
  config: `${options.config}${extraNote()}`,
  retryNote: "n/a (W3 only)",
  unavailable: () => (installed() ? undefined : "no pgbouncer (apt-get install pgbouncer, or DOCKET_PGBOUNCER)"),
  open: async (target, mode) => {
    await ensurePooler(target)
    return openWith(options.connect)(target, mode)
  },
  probe: (target) => pgProbe((target as Extract<Target, { store: "pg" }>).url, COUNT),
  startWorker: startWorkerWith(options.connect)
})

export const docketPgBouncer = contender({
  name: "docket-pgbouncer",
  label: "Docket via PgBouncer, listenDatabase",
  config: "Docket.layer defaults through PgBouncer 1.18 (transaction pooling, 10 server connections), " +
    "the LISTEN connection direct (listenDatabase); the enqueuer through the pooler too",
  connect: (target) => ({
    database: pooled(target),
    databaseOptions: { listenDatabase: (target as Extract<Target, { store: "pg" }>).url }
  })
})

export const docketPgBouncerPoll = contender({
  name: "docket-pgbouncer-poll",
  label: "Docket via PgBouncer, poll",
  config: "Docket.layer defaults through PgBouncer 1.18 (transaction pooling, 10 server connections), " +
    "no listenDatabase: LISTEN found deaf, the 2 s poll; the enqueuer through the pooler too",
  connect: (target) => ({ database: pooled(target) })
})
