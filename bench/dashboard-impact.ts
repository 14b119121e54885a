/**
 * Does a dashboard slow the workers of a busy queue? (issue #18)
 *
 * Each pair, in alternating order: a fresh PostgreSQL database, N no-op items
 * enqueued, one `docket worker` process (default flags, output not a
 * terminal) drains them; timed from the worker's start line to the last item
 * done. In the "dashboard" run a `docket dashboard` process serves the same
 * database and a poller asks it for pages, by one of two profiles:
 *   heavy (default): the overview page, the items page, /api/overview and
 *     /metrics once a second each (four requests a second);
 *   realistic: what one open tab and a Prometheus server ask: the overview
 *     page every 5 s (its live refresh), /api/throughput every 30 s (the
 *     chart), /metrics every 15 s (a scrape).
 * Prints each pair and the medians; the ratio is dashboard / alone.
 *
 *   npx tsx bench/dashboard-impact.ts [pairs=8] [items=60000] [heavy|realistic]
 *
 * BENCH_PG_URL: the admin URL (default postgres://root@127.0.0.1:5432/postgres).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { fileURLToPath } from "node:url"
import pg from "pg"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/docket.mjs", import.meta.url))
const TASKS = fileURLToPath(new URL("./dashboard/", import.meta.url))
const ADMIN = process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"
const PAIRS = Number(process.argv[2] ?? 8)
const ITEMS = Number(process.argv[3] ?? 60_000)
const PROFILE = process.argv[4] ?? "heavy"
const POLLS: ReadonlyArray<readonly [string, number]> = PROFILE === "realistic"
  ? [["/", 5000], ["/api/throughput", 30_000], ["/metrics", 15_000]]
  : PROFILE === "heavy"
  ? [["/", 1000], ["/items", 1000], ["/api/overview", 1000], ["/metrics", 1000]]
  : (() => {
    throw new Error(`profile: heavy or realistic, not ${PROFILE}`)
  })()

const urlFor = (database: string) => {
  const url = new URL(ADMIN)
  url.pathname = `/${database}`
  return url.toString()
}

const docket = (args: Array<string>): ChildProcess =>
  spawn(process.execPath, [BIN, ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] })

const lineMatching = (child: ChildProcess, pattern: RegExp, timeoutMs = 60_000) =>
  new Promise<string>((resolve, reject) => {
    let buffer = ""
    const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms: ${buffer.slice(-500)}`)), timeoutMs)
    child.stdout?.on("data", (chunk: Buffer) => {
      buffer += chunk.toString()
      const line = buffer.split("\n").find((l) => pattern.test(l))
      if (line !== undefined) {
        clearTimeout(timer)
        resolve(line)
      }
    })
    child.once("exit", () => reject(new Error(`exited before ${pattern}: ${buffer.slice(-500)}`)))
  })

const stop = async (child: ChildProcess) => {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill("SIGTERM")
  await once(child, "exit")
}

const run = async (withDashboard: boolean): Promise<number> => {
  const database = `bench_dash_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const admin = new pg.Client({ connectionString: ADMIN })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${database}`)
  const url = urlFor(database)
  const client = new pg.Client({ connectionString: url })
  let dashboard: ChildProcess | undefined
  let worker: ChildProcess | undefined
  let polling = true
  try {
    // Migrate and fill: the command migrates on open; the rows go in with one statement.
    const migrate = docket(["migrate", "--database", url])
    await once(migrate, "exit")
    await client.connect()
    await client.query(
      `INSERT INTO docket_items (kind, payload, run_at, created_at, updated_at)
       SELECT 'bench.noop', '{}', docket_now_ms(), docket_now_ms(), docket_now_ms() FROM generate_series(1, $1)`,
      [ITEMS]
    )
    const poller: Array<Promise<void>> = []
    if (withDashboard) {
      dashboard = docket(["dashboard", "--database", url, "--port", "0"])
      const address = /listening on (http:\/\/\S+?)\/? over/.exec(await lineMatching(dashboard, /listening on/))?.[1]
      if (address === undefined) throw new Error("no dashboard address")
      for (const [path, everyMs] of POLLS) {
        poller.push((async () => {
          while (polling) {
            const started = performance.now()
            const response = await fetch(address + path)
            if (!response.ok) throw new Error(`${path}: ${response.status}`)
            await response.text()
            // Woken early when the run ends, so a long period does not hold it up.
            const end = performance.now() + Math.max(0, everyMs - (performance.now() - started))
            while (polling && performance.now() < end) await new Promise((resolve) => setTimeout(resolve, 50))
          }
        })())
      }
    }
    worker = docket(["worker", "--database", url, "--tasks", TASKS])
    await lineMatching(worker, /started on/)
    const started = performance.now()
    for (;;) {
      const { rows } = await client.query(
        "SELECT count(*)::int AS n FROM docket_items WHERE state IN ('waiting', 'running')"
      )
      if (rows[0].n === 0) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const seconds = (performance.now() - started) / 1000
    polling = false
    await Promise.all(poller)
    return ITEMS / seconds
  } finally {
    polling = false
    if (worker) await stop(worker)
    if (dashboard) await stop(dashboard)
    await client.end().catch(() => {})
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await admin.end()
  }
}

const median = (values: Array<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

const alone: Array<number> = []
const watched: Array<number> = []
for (let i = 0; i < PAIRS; i++) {
  const order = i % 2 === 0 ? [false, true] : [true, false]
  for (const withDashboard of order) (withDashboard ? watched : alone).push(await run(withDashboard))
  console.log(`pair ${i + 1}: alone ${Math.round(alone[i])} jobs/s, with a dashboard ${Math.round(watched[i])} jobs/s`)
}
const ratios = alone.map((a, i) => watched[i] / a)
console.log(
  `medians (${PAIRS} pairs, ${ITEMS} items, ${PROFILE}): alone ${Math.round(median(alone))} jobs/s, with a dashboard ` +
    `${Math.round(median(watched))} jobs/s; ratio ${median(watched) / median(alone)} (pair-median ${median(ratios)})`
)
