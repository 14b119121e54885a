/**
 * `npx tsx bench/groups.ts` (`npm run bench:groups`): groups (issue 36) side
 * by side with their peers. See docs/benchmarks.md, "Groups (issue 36)".
 *
 *   npx tsx bench/groups.ts                           W7, W8 and G6, default sizes, 3 repetitions
 *   npx tsx bench/groups.ts --quick                   tiny sizes (a check that every contender works)
 *   npx tsx bench/groups.ts --workloads W7 --systems docket,pg-boss-fifo --stores pg --repeat 5
 *
 * Workloads (bench/lib/groupWorkloads.ts): W7 sequences (1,000 groups x 20
 * items, one at a time per group in enqueue order, 10 slots a process, 1 and 2
 * processes); W8 fairness (a 100,000-item group, then 20 groups x 10 items:
 * their enqueue-to-start latency), with sequences and with 10 at a time per
 * group; G6 (Docket only): 1,000,000 items due in 100,000 ordered groups, the
 * first 50,000 drained, against the same table with no groups.
 * Runs alternate between contenders (A B C A B C ...); each table cell is the
 * median of the repetitions. Every run checks the handlers' records: each item
 * ran once, in enqueue order per group, never more at once than the limit.
 * Flags: --quick, --workloads, --systems, --stores pg,sqlite, --procs 1,2, --repeat n,
 * --slots n (per process), --groups n (W7), --drain n (G6: items drained), --backlog n (G6: items in the table), --big n (W8: the big group), --json.
 * Environment: BENCH_PG_URL (default postgres://root@127.0.0.1:5432/postgres),
 * BENCH_PGBOSS_BATCH (pg-boss batchSize, default 500).
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { loadavg } from "node:os"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { GROUP_SYSTEMS, type GroupLimit, type GroupSystemName, loadGroupSystem } from "./adapters/groups.js"
import {
  DEFAULT_GROUP_SIZES,
  type GroupSample,
  type GroupSizes,
  QUICK_GROUP_SIZES,
  runBacklog,
  runW7,
  runW8,
  SEQUENCE
} from "./lib/groupWorkloads.js"
import { fmt, median } from "./lib/stats.js"
import { closeAdmin, type Env } from "./lib/stores.js"
import { PROJECT_DIR } from "./lib/workers.js"

export const GROUP_WORKLOADS = ["W7", "W8", "G6"] as const
type GroupWorkload = (typeof GROUP_WORKLOADS)[number]

/** W8's second setting: a limit that does not stop one group from taking every slot (10 slots). */
export const TEN_AT_A_TIME: GroupLimit = { concurrency: 10, ordered: false }

export interface GroupOptions {
  readonly workloads: ReadonlyArray<GroupWorkload>
  readonly systems: ReadonlyArray<GroupSystemName>
  readonly stores: ReadonlyArray<"pg" | "sqlite">
  readonly procs: ReadonlyArray<number>
  readonly repeat: number
  readonly sizes: GroupSizes
  readonly env: Env
  readonly log: (line: string) => void
}

const list = <A extends string>(value: string, known: ReadonlyArray<A>, what: string): Array<A> => {
  const names = value.split(",").map((s) => s.trim()).filter(Boolean)
  const unknown = names.filter((n) => !(known as ReadonlyArray<string>).includes(n))
  if (unknown.length > 0) throw new Error(`unknown ${what} ${unknown.join(", ")}; known: ${known.join(", ")}`)
  return names as Array<A>
}

const positive = (flag: string | undefined, value: string): number => {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} needs a positive integer`)
  return n
}

export const parseGroupArgs = (argv: ReadonlyArray<string>): GroupOptions & { readonly json: boolean } => {
  let workloads: ReadonlyArray<GroupWorkload> = GROUP_WORKLOADS
  let systems: ReadonlyArray<GroupSystemName> = GROUP_SYSTEMS
  let stores: ReadonlyArray<"pg" | "sqlite"> = ["pg", "sqlite"]
  let procs: ReadonlyArray<number> = [1, 2]
  let repeat = 3
  let sizes = DEFAULT_GROUP_SIZES
  let json = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => {
      const v = argv[++i]
      if (v === undefined) throw new Error(`${arg} needs a value`)
      return v
    }
    switch (arg) {
      case "--quick":
        sizes = QUICK_GROUP_SIZES
        break
      case "--workloads":
        workloads = list(value().toUpperCase(), GROUP_WORKLOADS, "workload(s)")
        break
      case "--systems":
        systems = list(value(), GROUP_SYSTEMS, "system(s)")
        break
      case "--stores":
        stores = list(value(), ["pg", "sqlite"] as const, "store(s)")
        break
      case "--procs":
        procs = value().split(",").map(Number)
        if (procs.some((n) => !Number.isInteger(n) || n < 1)) throw new Error("--procs needs positive integers")
        break
      case "--repeat":
        repeat = Number(value())
        if (!Number.isInteger(repeat) || repeat < 1) throw new Error("--repeat needs a positive integer")
        break
      case "--drain":
        sizes = { ...sizes, drain: positive(arg, value()) }
        break
      case "--backlog":
        sizes = { ...sizes, backlog: positive(arg, value()) }
        break
      case "--slots":
        sizes = { ...sizes, slots: positive(arg, value()) }
        break
      case "--groups":
        sizes = { ...sizes, groups: positive(arg, value()) }
        break
      case "--big":
        sizes = { ...sizes, big: positive(arg, value()) }
        break
      case "--json":
        json = true
        break
      default:
        throw new Error(`unknown argument ${arg} (see the comment at the top of bench/groups.ts)`)
    }
  }
  return {
    workloads,
    systems,
    stores,
    procs,
    repeat,
    sizes,
    json,
    env: {
      pgAdminUrl: process.env.BENCH_PG_URL ?? process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres",
      redisUrl: "",
      redisDb: 0
    },
    log: (line) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`)
  }
}

/** Every run of one repetition, in the order they alternate. */
const plan = (o: GroupOptions): Array<() => Promise<GroupSample>> => {
  const runs: Array<() => Promise<GroupSample>> = []
  const pairs = (limit: GroupLimit) =>
    o.systems.flatMap((name) => {
      const system = loadGroupSystem(name)
      if (system.unsupported(limit) !== undefined) return []
      return o.stores.filter((s) => system.stores.includes(s)).map((store) => [name, store] as const)
    })
  if (o.workloads.includes("W7")) {
    for (const procs of o.procs) {
      for (const [name, store] of pairs(SEQUENCE)) runs.push(() => runW7(o.env, name, store, procs, o.sizes))
    }
  }
  if (o.workloads.includes("W8")) {
    for (const limit of [SEQUENCE, TEN_AT_A_TIME]) {
      for (const [name, store] of pairs(limit)) runs.push(() => runW8(o.env, name, store, limit, o.sizes))
    }
  }
  if (o.workloads.includes("G6") && o.systems.includes("docket")) {
    for (const store of o.stores) {
      runs.push(() => runBacklog(o.env, store, false, o.sizes), () => runBacklog(o.env, store, true, o.sizes))
    }
  }
  return runs
}

const describe = (s: GroupSample) =>
  `${s.workload} ${s.system} ${s.store} ${s.procs}p ${s.limit === null ? "ungrouped" : `${s.limit.concurrency}${s.limit.ordered ? " ordered" : ""}`}`

export const runGroups = async (o: GroupOptions): Promise<Array<GroupSample>> => {
  const samples: Array<GroupSample> = []
  const runs = plan(o)
  for (let r = 0; r < o.repeat; r++) {
    for (const run of runs) {
      const sample = await run()
      samples.push(sample)
      const c = sample.check
      o.log(`${describe(sample)}: ${sample.error ?? [
        sample.rate !== undefined ? `${fmt(sample.rate)} items/s` : "",
        sample.latency !== undefined ? `small p50 ${fmt(sample.latency.p50)} ms p99 ${fmt(sample.latency.p99)} ms (${sample.latency.n}), big ${fmt((sample.bigThrough ?? NaN) * 100)}% through` : "",
        c !== undefined ? `runs ${c.runs}, distinct ${c.distinct}, out of order ${c.outOfOrder}, max at once ${c.maxAtOnce}` : "",
        `load ${sample.load.toFixed(1)}`
      ].filter(Boolean).join("; ")}`)
    }
  }
  return samples
}

/** Where a sample breaks its workload's promise (empty: it kept it). */
export const violations = (s: GroupSample): Array<string> => {
  const out: Array<string> = []
  if (s.error !== undefined) return [s.error]
  const c = s.check
  if (c === undefined) return out
  if (c.runs !== c.distinct) out.push(`${c.runs - c.distinct} items ran twice`)
  if (s.workload === "W7" && c.distinct !== s.expected) out.push(`${c.distinct} of ${s.expected} items ran`)
  if (s.limit !== null && s.limit.ordered && c.outOfOrder > 0) out.push(`${c.outOfOrder} runs out of enqueue order`)
  if (s.limit !== null && c.maxAtOnce > s.limit.concurrency) out.push(`${c.maxAtOnce} of a group at once`)
  return out
}

const range = (values: ReadonlyArray<number>) =>
  values.length > 1 ? ` (${fmt(Math.min(...values))}-${fmt(Math.max(...values))})` : ""

const label = (s: GroupSample) =>
  s.system === "docket-ungrouped"
    ? `Docket, no groups (${s.store === "pg" ? "PostgreSQL" : "SQLite"})`
    : `${loadGroupSystem(s.system).label}${s.system === "docket" ? ` (${s.store === "pg" ? "PostgreSQL" : "SQLite"})` : ""}`

const keyOf = (s: GroupSample) => `${s.system}|${s.store}`

/** The markdown tables of a run: medians, ranges, ratios to Docket on PostgreSQL, the checks. */
export const renderGroups = (samples: ReadonlyArray<GroupSample>, sizes: GroupSizes): string => {
  const out: Array<string> = []
  const loads = samples.map((s) => s.load)
  out.push(`Load average (1 min) at the runs' starts: ${fmt(Math.min(...loads))}-${fmt(Math.max(...loads))}; now ${loadavg()[0].toFixed(1)}.`, "")
  const bad = samples.filter((s) => violations(s).length > 0)
  const checkNote = (group: ReadonlyArray<GroupSample>) => {
    const v = group.flatMap(violations)
    return v.length === 0 ? "kept" : [...new Set(v)].join("; ")
  }
  const w7 = samples.filter((s) => s.workload === "W7")
  if (w7.length > 0) {
    const procs = [...new Set(w7.map((s) => s.procs))].sort()
    const keys = [...new Set(w7.map(keyOf))]
    const rate = (key: string, p: number) => w7.filter((s) => keyOf(s) === key && s.procs === p && s.error === undefined).map((s) => s.rate!)
    out.push(`**W7 sequences**: ${sizes.groups.toLocaleString("en-US")} groups x ${sizes.perGroup} items, one at a time per group in enqueue order, ${sizes.slots} slots a process; items/s (median, range), ratio to Docket on PostgreSQL.`, "")
    out.push(`| contender | ${procs.map((p) => `${p} proc${p > 1 ? "s" : ""} items/s | ratio`).join(" | ")} | order and one-at-a-time |`)
    out.push(`|---|${procs.map(() => "---:|---:").join("|")}|---|`)
    for (const key of keys) {
      const cells = procs.map((p) => {
        const mine = median(rate(key, p))
        const base = median(rate("docket|pg", p))
        return `${fmt(mine)}${range(rate(key, p))} | ${fmt(mine / base)}x`
      })
      out.push(`| ${label(w7.find((s) => keyOf(s) === key)!)} | ${cells.join(" | ")} | ${checkNote(w7.filter((s) => keyOf(s) === key))} |`)
    }
    out.push("")
  }
  const w8 = samples.filter((s) => s.workload === "W8")
  for (const limit of [SEQUENCE, TEN_AT_A_TIME]) {
    const these = w8.filter((s) => s.limit?.concurrency === limit!.concurrency)
    if (these.length === 0) continue
    const small = sizes.small * sizes.smallEach
    out.push(`**W8 fairness, ${limit!.ordered ? "sequences (1 at a time, ordered)" : `${limit!.concurrency} at a time per group`}**: one group of ${sizes.big.toLocaleString("en-US")} items, then ${sizes.small} groups x ${sizes.smallEach} enqueued while it drains, ${sizes.slots} slots; the small groups' enqueue-to-start (medians of the runs' percentiles), and how far the big group had got when the last small item started.`, "")
    out.push("| contender | small p50 ms | small p99 ms | small max ms | started | big group through | checks |")
    out.push("|---|---:|---:|---:|---:|---:|---|")
    for (const key of [...new Set(these.map(keyOf))]) {
      const runs = these.filter((s) => keyOf(s) === key && s.latency !== undefined)
      const m = (f: (s: GroupSample) => number) => fmt(median(runs.map(f)))
      out.push(`| ${label(these.find((s) => keyOf(s) === key)!)} | ${m((s) => s.latency!.p50)} | ${m((s) => s.latency!.p99)} | ${m((s) => s.latency!.max)} | ${runs.map((s) => s.latency!.n).join(", ")} of ${small} | ${m((s) => s.bigThrough! * 100)}% | ${checkNote(these.filter((s) => keyOf(s) === key))} |`)
    }
    out.push("")
  }
  const g6 = samples.filter((s) => s.workload === "G6")
  if (g6.length > 0) {
    out.push(`**G6 grouped backlog**: ${sizes.backlog.toLocaleString("en-US")} items due in ${sizes.backlogGroups.toLocaleString("en-US")} ordered groups (concurrency 1), the first ${sizes.drain.toLocaleString("en-US")} drained, 1 process, ${sizes.slots} slots; against the same table with no groups (a W2 drain over the same backlog).`, "")
    out.push("| store | no groups items/s | grouped items/s | ratio | checks |")
    out.push("|---|---:|---:|---:|---|")
    for (const store of [...new Set(g6.map((s) => s.store))]) {
      const r = (system: string) => g6.filter((s) => s.store === store && s.system === system && s.error === undefined).map((s) => s.rate!)
      const plain = r("docket-ungrouped")
      const grouped = r("docket")
      out.push(`| ${store === "pg" ? "PostgreSQL" : "SQLite"} | ${fmt(median(plain))}${range(plain)} | ${fmt(median(grouped))}${range(grouped)} | ${fmt(median(grouped) / median(plain))}x | ${checkNote(g6.filter((s) => s.store === store))} |`)
    }
    out.push("")
  }
  if (bad.length > 0) out.push(`Runs that broke a promise or failed: ${bad.map((s) => `${describe(s)}: ${violations(s).join("; ")}`).join(" / ")}`, "")
  return out.join("\n")
}

const main = async () => {
  const options = parseGroupArgs(process.argv.slice(2))
  options.log(`groups bench: ${options.workloads.join(", ")}; ${options.systems.join(", ")}; ${options.stores.join(", ")}; repeat ${options.repeat}`)
  const samples = await runGroups(options)
  await closeAdmin()
  const markdown = renderGroups(samples, options.sizes)
  console.log(`\n${markdown}`)
  const dir = join(PROJECT_DIR, "bench", "results")
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "groups.md"), markdown)
  if (options.json) writeFileSync(join(dir, "groups.json"), JSON.stringify(samples, null, 2))
  if (samples.some((s) => (s.system === "docket" || s.system === "docket-ungrouped") && violations(s).length > 0)) process.exitCode = 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch(async (error) => {
    console.error(error instanceof Error ? error.stack : error)
    await closeAdmin().catch(() => {})
    process.exit(2)
  })
}
