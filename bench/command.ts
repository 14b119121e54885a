/**
 * The command as production runs it (issue 19): `docket worker` against
 * graphile-worker's own command, each a child process with its stdout and
 * stderr written to a file (not a terminal: systemd, containers), default
 * flags except the database, the tasks and concurrency 10.
 *
 *   npx tsx bench/command.ts [--repeat N] [--jobs N] [--only a,b] [--json]
 *
 * Each run: a fresh PostgreSQL database, N no-op jobs enqueued (Docket: the
 * library's enqueueMany in batches of 2,000; graphile-worker: its schema
 * installed by its own `--schema-only`, then its SQL `add_jobs` in batches of
 * 5,000), then the command started; the pending jobs are counted every 25 ms
 * on a separate connection until none is left. Reported: jobs/s from the
 * spawn (what a restart with a backlog sees, start-up included) and from the
 * first finished job (the drain itself), the start-up, and the bytes the
 * command wrote (kept in .tmp/bench-command/<name>-<rep>.log). Contenders alternate within each repetition; medians.
 *
 * Contenders: `docket` (the compiled command, `node dist/cli/main.js worker`,
 * built by `npm run build` when dist/ is missing), `docket-items` (the same
 * with --log-items: a line per started and done item), `gw` (the
 * `graphile-worker` bin of the project's devDependency, 0.18) with a
 * graphile.config.mjs of its documented high-throughput settings
 * (`localQueue: { size: 500 }`, `completeJobBatchDelay: 0`,
 * `failJobBatchDelay: 0`), as bench/adapters/graphile-worker.ts uses them.
 * `docket-before` (optional): the command before issue 19's output change
 * (a line per started and done item by default, one write each), when built
 * into .tmp/before:
 *   mkdir -p .tmp/before && git archive 0201c3a src migrations tsconfig.json \
 *     tsconfig.build.json package.json | tar -x -C .tmp/before && \
 *     (cd .tmp/before && node ../../node_modules/typescript/bin/tsc -p tsconfig.build.json)
 * graphile-worker logs a line per job by default ("Completed task ..."): that
 * is its command's default, kept.
 *
 * Environment: BENCH_PG_URL (default postgres://root@127.0.0.1:5432/postgres).
 */
import { execFileSync, spawn } from "node:child_process"
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import pg from "pg"
import { docketPg } from "./adapters/docket.js"
import type { Payload } from "./adapters/types.js"
import { median } from "./lib/stats.js"
import { closeAdmin, dropTarget, type Env, freshTarget } from "./lib/stores.js"

const ROOT = resolve(import.meta.dirname, "..")
const env: Env = {
  pgAdminUrl: process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres",
  redisUrl: "",
  redisDb: 0
}

interface Contender {
  readonly name: string
  readonly label: string
  readonly available: () => boolean
  readonly prepare: (url: string, n: number) => Promise<void>
  readonly command: (url: string, dir: string) => { readonly args: ReadonlyArray<string>; readonly cwd: string }
  readonly pendingSql: string
}

const DOCKET_MAIN = join(ROOT, "dist", "cli", "main.js")
const DOCKET_PENDING = `SELECT (SELECT count(*) FROM docket_items WHERE state = 'waiting')
  + (SELECT count(*) FROM docket_items WHERE state = 'running') AS n`

const docketEnqueue = async (url: string, n: number) => {
  const client = await docketPg.open({ store: "pg", url, database: "" }, "plain")
  const payloads: Array<Payload> = Array.from({ length: n }, (_, i) => ({ i, t: Date.now() }))
  await client.enqueueBulk(payloads)
  await client.close()
}

const docket = (name: string, label: string, extra: ReadonlyArray<string>, main = DOCKET_MAIN): Contender => ({
  name,
  label,
  available: () => existsSync(main),
  prepare: docketEnqueue,
  command: (url, dir) => ({
    args: [main, "worker", "--database", url, "--tasks", join(dir, "tasks"), "--concurrency", "10", ...extra],
    cwd: dir
  }),
  pendingSql: DOCKET_PENDING
})

const gwBin = (prefix: string) => join(ROOT, prefix, "node_modules", "graphile-worker", "dist", "cli.js")

const gwVersion = (prefix: string) =>
  existsSync(gwBin(prefix))
    ? String(JSON.parse(readFileSync(join(ROOT, prefix, "node_modules", "graphile-worker", "package.json"), "utf8")).version)
    : "(not installed)"

const graphile = (name: string, prefix: string): Contender => ({
  name,
  label: `graphile-worker ${gwVersion(prefix)} command, local queue`,
  available: () => existsSync(gwBin(prefix)),
  prepare: async (url, n) => {
    execFileSync(process.execPath, [gwBin(prefix), "--connection", url, "--schema-only"], { stdio: "ignore" })
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    for (let from = 0; from < n; from += 5000) {
      const specs = Array.from({ length: Math.min(5000, n - from) }, (_, i) => ({
        identifier: "bench",
        payload: { i: from + i, t: Date.now() }
      }))
      await client.query(
        `select count(*) from graphile_worker.add_jobs(
           array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)))`,
        [JSON.stringify(specs)]
      )
    }
    await client.end()
  },
  command: (url, dir) => ({
    args: [gwBin(prefix), "--connection", url, "--jobs", "10", "--config", join(dir, "graphile.config.mjs")],
    cwd: dir
  }),
  pendingSql: "select count(*) as n from graphile_worker._private_jobs"
})

const CONTENDERS: ReadonlyArray<Contender> = [
  docket("docket", "`docket worker` (compiled), default flags", []),
  graphile("gw", "."),
  docket("docket-items", "`docket worker` --log-items (a line per started and done, batched writes)", ["--log-items"]),
  docket(
    "docket-before",
    "`docket worker` before issue 19 (0201c3a: a line per started and done, one write each)",
    [],
    join(ROOT, ".tmp", "before", "dist", "cli", "main.js")
  )
]

/** The tasks folder both commands read (no-op tasks; `bench` for both) and graphile's config. */
const makeDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "bench-command-"))
  mkdirSync(join(dir, "tasks"))
  writeFileSync(join(dir, "tasks", "bench.mjs"), "export default async () => {}\n")
  writeFileSync(
    join(dir, "graphile.config.mjs"),
    `export default { worker: { taskDirectory: ${JSON.stringify(join(dir, "tasks"))}, concurrentJobs: 10, ` +
      `localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } }\n`
  )
  return dir
}

interface Sample {
  readonly fromSpawn: number
  readonly drain: number
  readonly startupMs: number
  readonly bytes: number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Where each run's output is kept, for a look afterwards (gitignored). */
const LOGS = join(ROOT, ".tmp", "bench-command")

const runOnce = async (c: Contender, n: number, dir: string, rep: number): Promise<Sample> => {
  const target = await freshTarget(env, "pg", `cmd_${c.name}`)
  if (target.store !== "pg") throw new Error("pg only")
  mkdirSync(LOGS, { recursive: true })
  const out = join(LOGS, `${c.name}-${rep}.log`)
  const fd = openSync(out, "w")
  try {
    await c.prepare(target.url, n)
    const probe = new pg.Client({ connectionString: target.url, application_name: "bench-probe" })
    await probe.connect()
    const pending = async () => Number((await probe.query(c.pendingSql)).rows[0].n)
    const { args, cwd } = c.command(target.url, dir)
    const t0 = performance.now()
    const child = spawn(process.execPath, args, { cwd, stdio: ["ignore", fd, fd], env: { ...process.env, NODE_ENV: "production" } })
    let exited = false
    child.on("exit", () => void (exited = true))
    let first: number | undefined
    let left = n
    while (left > 0) {
      if (exited) throw new Error(`${c.name} exited early; see ${out}`)
      if (performance.now() - t0 > 300_000) throw new Error(`${c.name}: still ${left} pending after 300 s`)
      await sleep(25)
      left = await pending()
      if (first === undefined && left < n) first = performance.now()
    }
    const end = performance.now()
    child.kill("SIGTERM")
    await new Promise<void>((r) => (exited ? r() : child.on("exit", () => r())))
    await probe.end()
    const startupMs = (first ?? end) - t0
    return {
      fromSpawn: n / ((end - t0) / 1000),
      drain: n / Math.max(0.001, (end - (first ?? t0)) / 1000),
      startupMs,
      bytes: statSync(out).size
    }
  } finally {
    closeSync(fd)
    await dropTarget(env, target)
  }
}

const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i < 0 ? undefined : process.argv[i + 1]
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US")

const main = async () => {
  const repeat = Number(flag("repeat") ?? 3)
  const jobs = Number(flag("jobs") ?? 50_000)
  const only = flag("only")?.split(",")
  if (!existsSync(DOCKET_MAIN)) execFileSync("npm", ["run", "build"], { cwd: ROOT, stdio: "inherit" })
  const chosen = CONTENDERS.filter((c) => (only === undefined || only.includes(c.name)) && c.available())
  const skipped = CONTENDERS.filter((c) => !chosen.includes(c)).map((c) => c.name)
  if (skipped.length > 0) console.error(`skipped: ${skipped.join(", ")} (not asked for, or not installed)`)
  const dir = makeDir()
  const samples = new Map<string, Array<Sample>>(chosen.map((c) => [c.name, []]))
  try {
    for (let r = 0; r < repeat; r++) {
      // Alternating: each repetition starts one contender further on.
      const order = chosen.map((_, i) => chosen[(i + r) % chosen.length])
      for (const c of order) {
        const s = await runOnce(c, jobs, dir, r + 1)
        samples.get(c.name)!.push(s)
        console.error(
          `rep ${r + 1} ${c.name}: ${fmt(s.fromSpawn)} jobs/s from spawn, ${fmt(s.drain)} drain, ` +
            `start-up ${fmt(s.startupMs)} ms, ${fmt(s.bytes)} bytes written`
        )
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
    await closeAdmin()
  }
  const rows = chosen.map((c) => {
    const s = samples.get(c.name)!
    return {
      name: c.name,
      label: c.label,
      fromSpawn: median(s.map((x) => x.fromSpawn)),
      drain: median(s.map((x) => x.drain)),
      startupMs: median(s.map((x) => x.startupMs)),
      bytes: median(s.map((x) => x.bytes))
    }
  })
  const base = rows.find((r) => r.name === "docket")
  if (process.argv.includes("--json")) {
    console.log(JSON.stringify({ jobs, repeat, rows }, null, 2))
    return
  }
  console.log(`${fmt(jobs)} no-op jobs, concurrency 10, PostgreSQL, output to a file, medians of ${repeat}\n`)
  console.log("| command | jobs/s from spawn | drain jobs/s | start-up | bytes written | docket vs it (from spawn / drain) |")
  console.log("|---|---|---|---|---|---|")
  for (const r of rows) {
    const ratio = base === undefined || r === base
      ? "-"
      : `${(base.fromSpawn / r.fromSpawn).toFixed(2)}x / ${(base.drain / r.drain).toFixed(2)}x`
    console.log(
      `| ${r.label} | ${fmt(r.fromSpawn)} | ${fmt(r.drain)} | ${fmt(r.startupMs)} ms | ${fmt(r.bytes)} | ${ratio} |`
    )
  }
}

await main()
