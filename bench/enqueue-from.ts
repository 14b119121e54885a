/**
 * `docket enqueue --from <file>` as users run it (issue 19): the real command
 * as a child process, an N-line NDJSON file, a fresh database each run.
 * Reports items/s (wall time of the whole command, start-up included) and the
 * child's peak RSS (VmHWM polled from /proc, the high-water mark the kernel
 * keeps, so a missed poll loses nothing but the last sample).
 *
 *   npx tsx bench/enqueue-from.ts [lines...] [--repeat N] [--pg-only|--sqlite-only] [--keyed]
 *
 * Defaults: 100000 and 1000000 lines, 1 run each, PostgreSQL at
 * DOCKET_BENCH_PG_URL (default postgres://root@127.0.0.1:5432/postgres) and a
 * SQLite file. The machine this runs on may be shared: the child's CPU time
 * (user + system, from /proc) is reported beside the wall time.
 */
import { spawn } from "node:child_process"
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
// DOCKET_BENCH_BIN: another checkout's bin/docket.mjs (a "before" tree, to compare in one run), or
// dist/cli/main.js (the compiled command, as an installed package runs it: `npm run build` first).
// DOCKET_BENCH_NODE_FLAGS: node's own flags for the command, space-separated (e.g. --max-old-space-size=96).
const BIN = process.env.DOCKET_BENCH_BIN ?? join(ROOT, "bin", "docket.mjs")
const ADMIN = process.env.DOCKET_BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"

const argv = process.argv.slice(2)
const flag = (name: string) => argv.includes(name)
const repeatAt = argv.indexOf("--repeat")
const repeat = repeatAt >= 0 ? Number(argv[repeatAt + 1]) : 1
const sizes = argv.filter((a, i) => /^\d+$/.test(a) && argv[i - 1] !== "--repeat").map(Number)
const lineCounts = sizes.length > 0 ? sizes : [100_000, 1_000_000]
const keyed = flag("--keyed")

const dir = mkdtempSync(join(tmpdir(), "docket-bench-from-"))

/** Writes an N-line file: mostly plain items, some with per-line options (and keys with --keyed). */
const writeFile = async (lines: number): Promise<string> => {
  const path = join(dir, `items-${lines}.ndjson`)
  const out = createWriteStream(path)
  let chunk = ""
  for (let i = 1; i <= lines; i++) {
    const extra = i % 10 === 0 ? `,"priority":${i % 7},"maxAttempts":3` : i % 25 === 0 ? `,"delay":"5m"` : ""
    const key = keyed && i % 4 === 0 ? `,"key":"k-${i % 50_000}"` : ""
    chunk += `{"kind":"bench.item","payload":{"n":${i},"to":"user${i}@example.com"}${extra}${key}}\n`
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()))
      chunk = ""
    }
  }
  out.end(chunk)
  await new Promise<void>((r) => out.once("finish", () => r()))
  return path
}

const freshPg = async (): Promise<string> => {
  const name = `docket_bench_from_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const admin = new pg.Client({ connectionString: ADMIN })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(ADMIN)
  url.pathname = `/${name}`
  return url.toString()
}

const dropPg = async (url: string) => {
  const admin = new pg.Client({ connectionString: ADMIN })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`)
  await admin.end()
}

const countPg = async (url: string): Promise<number> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const r = await client.query<{ n: string }>("SELECT count(*) AS n FROM docket_items")
  await client.end()
  return Number(r.rows[0].n)
}

const vmHwm = (pid: number): number | null => {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return m === null ? null : Number(m[1]) * 1024
  } catch {
    return null
  }
}

const cpuMs = (pid: number): number | null => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return null
  }
}

interface Run {
  readonly ms: number
  readonly cpuMs: number
  readonly peakRss: number
  readonly stdout: string
}

/** Runs the command; peak RSS is the highest VmHWM seen (polled every 20 ms until exit). */
const runCommand = (args: ReadonlyArray<string>): Promise<Run> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const flags = (process.env.DOCKET_BENCH_NODE_FLAGS ?? "").split(" ").filter((f) => f !== "")
    const child = spawn(process.execPath, [...flags, BIN, ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    let peak = 0
    let cpu = 0
    const poll = setInterval(() => {
      const hwm = child.pid === undefined ? null : vmHwm(child.pid)
      if (hwm !== null) peak = Math.max(peak, hwm)
      const used = child.pid === undefined ? null : cpuMs(child.pid)
      if (used !== null) cpu = used
    }, 20)
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.on("error", reject)
    child.on("exit", (code) => {
      clearInterval(poll)
      const ms = performance.now() - started
      if (code !== 0) reject(new Error(`docket ${args.join(" ")} exited ${code}: ${stderr}`))
      else resolve({ ms, cpuMs: cpu, peakRss: peak, stdout })
    })
  })

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const main = async () => {
  const backends = flag("--sqlite-only") ? ["sqlite"] : flag("--pg-only") ? ["pg"] : ["pg", "sqlite"]
  console.log(`enqueue --from: ${lineCounts.join(", ")} lines, ${repeat} run(s) each${keyed ? ", keyed" : ""}`)
  console.log("| backend | lines | items/s (median) | wall s | command CPU s | peak RSS MB | output |")
  console.log("|---|---:|---:|---:|---:|---:|---|")
  for (const lines of lineCounts) {
    const file = await writeFile(lines)
    for (const backend of backends) {
      const runs: Array<Run> = []
      for (let r = 0; r < repeat; r++) {
        const url = backend === "pg" ? await freshPg() : join(dir, `q-${lines}-${r}.db`)
        try {
          // The schema is made first, so the run measures the enqueue (as on a queue in use).
          await runCommand(["migrate", "--database", url])
          const run = await runCommand(["enqueue", "--from", file, "--database", url])
          if (backend === "pg") {
            const n = await countPg(url)
            if (!keyed && n !== lines) throw new Error(`${n} rows for ${lines} lines`)
          }
          runs.push(run)
        } finally {
          if (backend === "pg") await dropPg(url)
          else rmSync(url, { force: true })
        }
      }
      const ms = median(runs.map((r) => r.ms))
      const rss = median(runs.map((r) => r.peakRss))
      const cpu = median(runs.map((r) => r.cpuMs))
      console.log(
        `| ${backend} | ${lines} | ${Math.round(lines / (ms / 1000)).toLocaleString("en")} | ${(ms / 1000).toFixed(2)} | ` +
          `${(cpu / 1000).toFixed(2)} | ${(rss / 2 ** 20).toFixed(0)} | ${runs[0].stdout.trim()} |`
      )
    }
    rmSync(file, { force: true })
  }
}

main().finally(() => rmSync(dir, { recursive: true, force: true })).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
