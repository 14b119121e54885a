/**
 * Where a worker's memory goes (issue 19): what each module costs to load,
 * and the resident memory of the commands as production runs them, idle and
 * draining, Docket beside graphile-worker's own command, on one PostgreSQL.
 *
 *   npx tsx bench/memory.ts [--jobs 50000] [--repeat 3]
 *
 * Docket runs compiled (`npm run build`, then `node dist/cli/main.js`: what
 * an installed package runs) and, as an experiment, bundled by esbuild
 * (tree-shaken, minified, split: what it would save to ship one). RSS is read
 * from /proc/<pid>/status (VmRSS) of the command's own process, every 50 ms.
 * "Idle" is read twice: 10 s after start, and 60 s after (V8's memory reducer
 * gives back the heap it grew while loading only after some idle seconds).
 */
import { execFileSync, spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const TMP = join(ROOT, ".tmp", "bench-memory")
const ADMIN = process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"
const require = createRequire(import.meta.url)

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const JOBS = arg("jobs", 50_000)
const REPEAT = arg("repeat", 3)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const mb = (kb: number) => (kb / 1024).toFixed(0)
const rssKb = (pid: number): number => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN)
  } catch {
    return NaN
  }
}

// --- what each module costs ---

const PROBE = `
import { readFileSync } from "node:fs"
for (const m of process.argv.slice(2)) await import(m)
gc()
const rss = Number(/VmRSS:\\s+(\\d+)/.exec(readFileSync("/proc/self/status", "utf8"))[1])
process.stdout.write(JSON.stringify({ rss, heap: process.memoryUsage().heapUsed / 1024 }))
`

const moduleCosts = () => {
  const probe = join(TMP, "probe.mjs")
  writeFileSync(probe, PROBE)
  const sets: ReadonlyArray<[string, ReadonlyArray<string>]> = [
    ["node alone", []],
    ["pg (the driver)", ["pg"]],
    ["better-sqlite3", ["better-sqlite3"]],
    ["graphile-worker", ["graphile-worker"]],
    ["effect (its index)", ["effect"]],
    ["effect/Effect + Layer + Stream + Schema (deep imports)", ["effect/Effect", "effect/Layer", "effect/Stream", "effect/Schema"]],
    ["@effect/cli", ["@effect/cli"]],
    ["@effect/sql-pg", ["@effect/sql-pg"]],
    ["@effect/sql-sqlite-node", ["@effect/sql-sqlite-node"]],
    ["@effect/platform-node NodeContext + NodeRuntime", ["@effect/platform-node/NodeContext", "@effect/platform-node/NodeRuntime"]],
    ["tsx's loader API (TypeScript task files only)", ["tsx/esm/api"]],
    ["docket (dist/index.js, the library)", [join(ROOT, "dist", "index.js")]],
    ["docket's worker command (dist/cli/commands/workerRun.js and its imports)", [join(ROOT, "dist", "cli", "commands", "workerRun.js")]]
  ]
  const rows = sets.map(([name, mods]) => {
    const runs = [0, 1, 2].map(() =>
      JSON.parse(execFileSync(process.execPath, ["--expose-gc", probe, ...mods], { cwd: ROOT, encoding: "utf8" })) as {
        rss: number
        heap: number
      }
    )
    return { name, rss: median(runs.map((r) => r.rss)), heap: median(runs.map((r) => r.heap)) }
  })
  const base = rows[0].rss
  console.log("\n| loaded | RSS MB | over node alone | V8 heap used MB |\n| --- | ---: | ---: | ---: |")
  for (const r of rows) console.log(`| ${r.name} | ${mb(r.rss)} | +${mb(r.rss - base)} | ${mb(r.heap)} |`)
}

// --- the commands ---

interface Contender {
  readonly name: string
  /** Makes the queue (and its schema) in `url`. */
  readonly setup: (url: string) => void
  readonly fill: (db: pg.Client, jobs: number) => Promise<void>
  readonly remaining: (db: pg.Client) => Promise<number>
  readonly spawn: (url: string) => ReturnType<typeof spawn>
}

const DOCKET_TASKS = join(TMP, "docket-tasks")
const GW_DIR = join(TMP, "gw")

const docket = (name: string, entry: string): Contender => ({
  name,
  setup: (url) => void execFileSync(process.execPath, [entry, "migrate", "--database", url], { stdio: "ignore" }),
  fill: async (db, jobs) => {
    await db.query(
      `INSERT INTO docket_items (kind, payload, run_at, created_at, updated_at)
       SELECT 'noop', '{}', docket_now_ms(), docket_now_ms(), docket_now_ms() FROM generate_series(1, $1)`,
      [jobs]
    )
  },
  remaining: async (db) =>
    Number((await db.query("SELECT count(*) AS n FROM docket_items WHERE state IN ('waiting', 'running')")).rows[0].n),
  spawn: (url) =>
    spawn(process.execPath, [entry, "worker", "--tasks", DOCKET_TASKS, "--database", url, "--concurrency", "10"], {
      stdio: ["ignore", "ignore", "inherit"]
    })
})

// graphile-worker 0.18 exports no ./package.json: its files are read from node_modules.
const GW_ROOT = join(ROOT, "node_modules", "graphile-worker")
const gwCli = (): string => join(GW_ROOT, "dist", "cli.js")
const graphileWorker: Contender = {
  name: `graphile-worker ${JSON.parse(readFileSync(join(GW_ROOT, "package.json"), "utf8")).version} (its command)`,
  setup: (url) => void execFileSync(process.execPath, [gwCli(), "--connection", url, "--schema-only"], { cwd: GW_DIR, stdio: "ignore" }),
  fill: async (db, jobs) => {
    await db.query("SELECT graphile_worker.add_job('noop', '{}'::json) FROM generate_series(1, $1)", [jobs])
  },
  remaining: async (db) => Number((await db.query("SELECT count(*) AS n FROM graphile_worker.jobs")).rows[0].n),
  spawn: (url) =>
    spawn(process.execPath, [gwCli(), "--connection", url, "--jobs", "10"], { cwd: GW_DIR, stdio: ["ignore", "ignore", "inherit"] })
}

const freshDatabase = async (name: string) => {
  const admin = new pg.Client({ connectionString: ADMIN })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  return ADMIN.replace(/\/[^/]*$/, `/${name}`)
}

const measure = async (c: Contender) => {
  const url = await freshDatabase("bench_memory")
  c.setup(url)
  const db = new pg.Client({ connectionString: url })
  await db.connect()
  try {
    // Idle: an empty queue.
    const idle = c.spawn(url)
    await sleep(10_000)
    const idle10 = rssKb(idle.pid!)
    await sleep(50_000)
    const idle60 = rssKb(idle.pid!)
    idle.kill("SIGTERM")
    await new Promise((resolve) => idle.once("close", resolve))
    // Draining: JOBS no-op jobs queued first.
    await c.fill(db, JOBS)
    const child = c.spawn(url)
    let peak = 0
    const sampler = setInterval(() => (peak = Math.max(peak, rssKb(child.pid!) || 0)), 50)
    const started = performance.now()
    while ((await c.remaining(db)) > 0) await sleep(100)
    const seconds = (performance.now() - started) / 1000
    clearInterval(sampler)
    child.kill("SIGTERM")
    await new Promise((resolve) => child.once("close", resolve))
    return { idle10, idle60, peak, rate: JOBS / seconds }
  } finally {
    await db.end()
  }
}

const main = async () => {
  rmSync(TMP, { recursive: true, force: true })
  mkdirSync(DOCKET_TASKS, { recursive: true })
  mkdirSync(join(GW_DIR, "tasks"), { recursive: true })
  writeFileSync(join(DOCKET_TASKS, "noop.mjs"), "export default async () => {}\n")
  writeFileSync(join(GW_DIR, "tasks", "noop.js"), "module.exports = async () => {}\n")
  writeFileSync(join(GW_DIR, "package.json"), "{}\n")
  if (!existsSync(join(ROOT, "dist", "cli", "main.js"))) execFileSync("npm", ["run", "build"], { cwd: ROOT, stdio: "inherit" })
  // The bundle lives in dist/ beside what it replaces, so it finds ../migrations as dist/ does.
  const bundleDir = join(ROOT, "dist", "bench-bundle")
  const esbuild = await import("esbuild")
  await esbuild.build({
    entryPoints: [join(ROOT, "dist", "cli", "main.js")],
    bundle: true,
    splitting: true,
    minify: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outdir: bundleDir,
    logLevel: "error",
    external: ["better-sqlite3", "pg", "pg-native", "tsx", "uplot"],
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" }
  })
  moduleCosts()
  const contenders = [
    docket("docket worker (compiled: dist/cli/main.js)", join(ROOT, "dist", "cli", "main.js")),
    docket("docket worker (bundled by esbuild, experiment)", join(bundleDir, "main.js")),
    graphileWorker
  ]
  const results = new Map<string, Array<Awaited<ReturnType<typeof measure>>>>()
  for (let rep = 0; rep < REPEAT; rep++) {
    // The order turns each repetition.
    for (const c of [...contenders.slice(rep % contenders.length), ...contenders.slice(0, rep % contenders.length)]) {
      const r = await measure(c)
      console.error(`${c.name} #${rep + 1}: idle ${mb(r.idle10)}/${mb(r.idle60)} MB, draining peak ${mb(r.peak)} MB, ${r.rate.toFixed(0)} jobs/s`)
      results.set(c.name, [...(results.get(c.name) ?? []), r])
    }
  }
  rmSync(bundleDir, { recursive: true, force: true })
  console.log(`\n| command (concurrency 10, PostgreSQL, medians of ${REPEAT}) | RSS idle 10 s | RSS idle 60 s | peak RSS draining ${JOBS.toLocaleString("en")} | jobs/s |`)
  console.log("| --- | ---: | ---: | ---: | ---: |")
  for (const c of contenders) {
    const rs = results.get(c.name)!
    console.log(`| ${c.name} | ${mb(median(rs.map((r) => r.idle10)))} MB | ${mb(median(rs.map((r) => r.idle60)))} MB | ${
      mb(median(rs.map((r) => r.peak)))
    } MB | ${median(rs.map((r) => r.rate)).toFixed(0)} |`)
  }
}

await main()
