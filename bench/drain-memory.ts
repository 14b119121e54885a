/**
 * The compiled `docket worker` draining a SQLite queue, its resident memory
 * sampled every second (issue 34): does it stay flat after warm-up, and does
 * it fit a 128 MiB container?
 *
 *   npm run build
 *   npx tsx bench/drain-memory.ts [--items 1000000] [--warmup 5] [--cgroup 128M] [--log FILE [--trace-gc]]
 *
 * The items (no-op, concurrency 10, history kept as by default) are added by
 * `docket enqueue --from` before the worker starts; the worker is the
 * installed package's command (`node dist/cli/main.js worker`) with its
 * output in a file, as production runs it. RSS is VmRSS of the worker's own
 * process from /proc, every second, until no item waits or runs; each
 * second's sample goes to .tmp/drain-memory/rss.csv. Printed: the drain's
 * items/s, RSS at warm-up's end, then min / median / max / last after it, and
 * the least-squares slope after warm-up in MB per minute (flat: about 0).
 *
 * `--log FILE` keeps the worker's output; `--trace-gc` runs the worker with
 * node's `--trace-gc` (a line per collection: the heap after each full one).
 *
 * `--cgroup 128M` runs the worker inside a new memory cgroup with that
 * limit and no swap (v1 or v2, whichever holds the memory controller:
 * test/support/cgroup.ts, which test/cli/container.test.ts uses too), removed
 * afterwards, and prints the group's peak charge and its OOM kills. Where no
 * such group can be made it says why and exits 2.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { makeMemoryCgroup, type MemoryCgroup } from "../test/support/cgroup.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const TMP = join(ROOT, ".tmp", "drain-memory")
const MAIN = join(ROOT, "dist", "cli", "main.js")
const require = createRequire(import.meta.url)

const option = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : undefined
}
const ITEMS = Number(option("items") ?? 1_000_000)
const WARMUP_S = Number(option("warmup") ?? 5)
const CGROUP_LIMIT = option("cgroup")
/** "128M", "1G" or bytes. */
const bytesOf = (size: string): number => {
  const m = /^(\d+)([KMG]?)$/i.exec(size.trim())
  if (m === null) throw new Error(`--cgroup takes a size such as 128M, not ${size}`)
  return Number(m[1]) * 1024 ** " KMG".indexOf((m[2] || " ").toUpperCase())
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const rssKb = (pid: number, field = "VmRSS"): number | undefined => {
  try {
    const line = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return line === null ? undefined : Number(line[1])
  } catch {
    return undefined
  }
}

const run = (args: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { stdio: ["ignore", "ignore", "inherit"] })
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`docket ${args[0]} exited ${code}`))))
  })

const slopePerMinute = (samples: ReadonlyArray<readonly [number, number]>): number => {
  const n = samples.length
  const mx = samples.reduce((s, [x]) => s + x, 0) / n
  const my = samples.reduce((s, [, y]) => s + y, 0) / n
  const sxy = samples.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0)
  const sxx = samples.reduce((s, [x]) => s + (x - mx) ** 2, 0)
  return sxx === 0 ? 0 : (sxy / sxx) * 60
}

const main = async () => {
  if (!existsSync(MAIN)) throw new Error("no dist/: run npm run build first")
  let cgroup: MemoryCgroup | undefined
  if (CGROUP_LIMIT !== undefined) {
    const made = makeMemoryCgroup(`drain-memory-${process.pid}`, bytesOf(CGROUP_LIMIT))
    if ("why" in made) {
      console.error(`cannot make a memory-limited cgroup here: ${made.why}`)
      process.exit(2)
    }
    cgroup = made
  }
  rmSync(TMP, { recursive: true, force: true })
  mkdirSync(join(TMP, "tasks"), { recursive: true })
  writeFileSync(join(TMP, "tasks", "noop.mjs"), "export default async () => {}\n")
  const db = join(TMP, "queue.db")
  writeFileSync(join(TMP, "items.ndjson"), `{"kind":"noop","payload":{}}\n`.repeat(ITEMS))
  await run(["enqueue", "--from", join(TMP, "items.ndjson"), "--database", db])
  const Sqlite = require("better-sqlite3") as typeof import("better-sqlite3")
  const reader = new Sqlite(db, { readonly: true })
  // Whether any item waits or runs, through the partial indexes on those
  // states (a count of them reads every row: most of a second at 3,000,000).
  const busy = reader.prepare(
    `SELECT EXISTS (SELECT 1 FROM docket_items WHERE state = 'waiting') ` +
      `OR EXISTS (SELECT 1 FROM docket_items WHERE state = 'running') AS busy`
  )
  const remaining = reader.prepare(`SELECT count(*) AS n FROM docket_items WHERE state IN ('waiting', 'running')`)

  const log = option("log")
  const output = log === undefined ? "ignore" : openSync(log, "w")
  const command = [process.execPath, ...(process.argv.includes("--trace-gc") ? ["--trace-gc"] : []), MAIN, "worker", "--tasks", join(TMP, "tasks"), "--database", db]
  // In a cgroup, by a shell that first moves itself into it.
  const worker = cgroup === undefined
    ? spawn(command[0], command.slice(1), { stdio: ["ignore", output, output] })
    : spawn("sh", cgroup.wrap(command), { stdio: ["ignore", output, output] })
  let exit: number | null | undefined
  worker.on("exit", (code, signal) => (exit = code ?? (signal === null ? null : -1)))
  const started = performance.now()
  const samples: Array<readonly [number, number]> = []
  // RssAnon beside VmRSS: the heap without the file pages mapped (code, the SQLite file).
  const anon: Array<number> = []
  let draining = true
  while (exit === undefined && draining) {
    await sleep(1000 - ((performance.now() - started) % 1000))
    const kb = rssKb(worker.pid!)
    const anonKb = rssKb(worker.pid!, "RssAnon")
    if (kb !== undefined && anonKb !== undefined) {
      samples.push([(performance.now() - started) / 1000, kb / 1024])
      anon.push(anonKb / 1024)
    }
    draining = (busy.get() as { busy: number }).busy === 1
  }
  const seconds = (performance.now() - started) / 1000
  // The kernel's own peak of the worker's RSS (VmHWM), read before it stops.
  const peakKb = rssKb(worker.pid!, "VmHWM")
  worker.kill("SIGTERM")
  while (exit === undefined) await sleep(50)
  const left = (remaining.get() as { n: number }).n
  reader.close()
  writeFileSync(join(TMP, "rss.csv"), "seconds,rss_mb,anon_mb\n" + samples.map(([t, mb], i) => `${t.toFixed(1)},${mb.toFixed(1)},${anon[i].toFixed(1)}`).join("\n") + "\n")

  const after = samples.filter(([t]) => t >= WARMUP_S)
  const anonAfter = samples.flatMap(([t], i) => (t >= WARMUP_S ? [[t, anon[i]] as const] : []))
  const sorted = after.map(([, mb]) => mb).sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
  console.log(`${ITEMS - left} of ${ITEMS} items in ${seconds.toFixed(1)} s (${Math.round((ITEMS - left) / seconds)} items/s, start included); worker exit ${exit}`)
  console.log(`peak RSS (VmHWM) ${peakKb === undefined ? "-" : (peakKb / 1024).toFixed(1)} MB; RSS every second: ${samples.length} samples; at ${WARMUP_S} s ${samples.find(([t]) => t >= WARMUP_S)?.[1].toFixed(1) ?? "-"} MB`)
  if (sorted.length > 0) {
    console.log(
      `after warm-up: min ${sorted[0].toFixed(1)}, median ${at(0.5).toFixed(1)}, max ${sorted[sorted.length - 1].toFixed(1)}, ` +
        `last ${after[after.length - 1][1].toFixed(1)} MB; slope ${slopePerMinute(after).toFixed(2)} MB/min ` +
        `(RssAnon: median ${anonAfter.map(([, mb]) => mb).sort((a, b) => a - b)[Math.floor(anonAfter.length / 2)].toFixed(1)} MB, ` +
        `slope ${slopePerMinute(anonAfter).toFixed(2)} MB/min)`
    )
  }
  if (cgroup !== undefined) {
    console.log(`cgroup v${cgroup.version} limited to ${CGROUP_LIMIT}: peak charge ${((cgroup.peak() ?? NaN) / 2 ** 20).toFixed(1)} MiB, OOM kills ${cgroup.oomKills()}`)
    cgroup.remove()
  }
}

await main()
