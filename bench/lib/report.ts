/** The benchmark's markdown: machine, tables, ratios, targets, details. */
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { cpus, loadavg, totalmem } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { Name } from "../adapters/registry.js"
import { type Contender, packageVersion } from "../adapters/types.js"
import { backlogOf, type Result, type RunKind, type Sample } from "./harness.js"
import { fmt, type Summary, summarize } from "./stats.js"
import { type Env, pgServerVersion, pgSettings, pgStatStatementsLoaded } from "./stores.js"
import { PROJECT_DIR } from "./workers.js"

export interface Machine {
  readonly date: string
  readonly cores: number
  readonly cpu: string
  readonly memoryGb: number
  readonly loadAverage: string
  readonly node: string
  readonly postgres: string
  readonly redis: string
  readonly pgStatStatements: boolean
  readonly commit: string
  /** Uncommitted changes under src/ and migrations/ when the run started. */
  readonly dirty: ReadonlyArray<string>
  readonly packages: Record<string, string>
}

const versionOf = (from: string, name: string): string =>
  packageVersion(name, pathToFileURL(join(from, "package.json")).href) ?? "not installed"

export const machineInfo = async (env: Env): Promise<Machine> => {
  const packages: Record<string, string> = {}
  for (
    const name of [
      "effect",
      "@effect/sql",
      "@effect/sql-pg",
      "@effect/sql-sqlite-node",
      "@effect/experimental",
      "better-sqlite3",
      "pg",
      "graphile-worker",
      "pg-boss",
      "bullmq",
      "ioredis"
    ]
  ) packages[name] = versionOf(PROJECT_DIR, name)
  let postgres = "unreachable"
  let pgss = false
  try {
    postgres = await pgServerVersion(env)
    pgss = await pgStatStatementsLoaded(env)
  } catch { /* reported as unreachable */ }
  let redis = "unreachable"
  try {
    const { redisInfo, removeQueue } = await import("../adapters/bullmq.js")
    const target = { store: "redis", url: env.redisUrl, db: env.redisDb, prefix: `bench-info-${process.pid}` } as const
    const info = await Promise.race([
      redisInfo(target, "server"),
      new Promise<string>((_, reject) => setTimeout(() => reject(new Error("timeout")), 2000))
    ])
    // Opening a queue writes its meta key: leave nothing behind.
    await removeQueue(target)
    redis = /redis_version:(\S+)/.exec(info)?.[1] ?? "?"
  } catch { /* unreachable */ }
  let commit = "?"
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: PROJECT_DIR, encoding: "utf8" }).trim()
  } catch { /* not a checkout */ }
  let dirty: Array<string> = []
  try {
    dirty = execFileSync("git", ["status", "--porcelain", "--", "src", "migrations"], { cwd: PROJECT_DIR, encoding: "utf8" })
      .split("\n").map((l) => l.slice(3).trim()).filter(Boolean)
  } catch { /* not a checkout */ }
  return {
    date: new Date().toISOString().replace("T", " ").slice(0, 16) + " UTC",
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? "?",
    memoryGb: Math.round(totalmem() / 1024 ** 3),
    loadAverage: loadavg().map((l) => l.toFixed(2)).join(", "),
    node: process.version,
    postgres,
    redis,
    pgStatStatements: pgss,
    commit,
    dirty,
    packages
  }
}

// --- aggregation -----------------------------------------------------------

const ok = (s: Sample) => s.error === undefined

const samplesOf = (result: Result, name: string, kind: RunKind, procs?: number) =>
  result.samples.filter((s) => s.contender === name && s.kind === kind && (procs === undefined || s.procs === procs))

const metric = (result: Result, name: string, kind: RunKind, key: string, procs?: number): Summary | undefined =>
  summarize(samplesOf(result, name, kind, procs).filter(ok).map((s) => s.values[key]).filter((v) => v !== undefined))

const cell = (s: Summary | undefined, digits?: (v: number) => string): string => {
  if (s === undefined) return "n/a"
  const f = digits ?? fmt
  return s.n === 1 || s.min === s.max ? f(s.median) : `${f(s.median)} (${f(s.min)}–${f(s.max)})`
}

const errorsOf = (result: Result, name: string, kind: RunKind, procs?: number) =>
  samplesOf(result, name, kind, procs).filter((s) => !ok(s)).length

const withErrors = (text: string, errors: number) => (errors > 0 ? `${text} [${errors} failed]` : text)

const onceCell = (result: Result, name: string): string => {
  const mine = result.samples.filter((s) => s.contender === name)
  if (mine.length === 0) return "n/a"
  const bad = mine.filter((s) => s.once !== undefined && !s.once.ok)
  const checked = mine.filter((s) => s.once !== undefined).length
  return bad.length === 0 ? `yes (${checked} runs)` : `**no**: ${bad.map((s) => `${s.kind}${s.kind === "W2" ? `/${s.procs}p` : ""} ${s.once!.detail}`).join("; ")}`
}

const hasKind = (result: Result, kind: RunKind, procs?: number) =>
  result.samples.some((s) => s.kind === kind && (procs === undefined || s.procs === procs))

// --- tables ----------------------------------------------------------------

const mainTable = (result: Result): string => {
  const w2procs = [...new Set(result.samples.filter((s) => s.kind === "W2").map((s) => s.procs))].filter((p) => p <= 2).sort()
  const head = ["Contender"]
  if (hasKind(result, "W1")) head.push("W1 bulk jobs/s ↑", "W1 one-by-one jobs/s ↑")
  for (const p of w2procs) head.push(`W2 drain jobs/s, ${p} proc${p > 1 ? "s" : ""} ↑`)
  if (hasKind(result, "W3")) head.push("W3 p50 / p95 / p99 ms ↓")
  if (hasKind(result, "W4")) head.push("W4 retries s ↓")
  if (hasKind(result, "W2", 1)) {
    head.push("Peak RSS MB ↓", "CPU ms per 1,000 jobs (W2): worker + server", "DB per job (W2): xacts · rows written · statements")
  }
  head.push("Each job once")
  const rows = result.contenders.filter((c) => result.samples.some((x) => x.contender === c.name)).map((c) => {
    const row = [c.docket ? `**${c.label}**` : c.label]
    if (hasKind(result, "W1")) {
      row.push(
        withErrors(cell(metric(result, c.name, "W1", "bulkRate")), errorsOf(result, c.name, "W1")),
        cell(metric(result, c.name, "W1", "oneRate"))
      )
    }
    for (const p of w2procs) row.push(withErrors(cell(metric(result, c.name, "W2", "rate", p)), errorsOf(result, c.name, "W2", p)))
    if (hasKind(result, "W3")) {
      const p = (k: string) => metric(result, c.name, "W3", k)
      const one = (s: Summary | undefined) => (s === undefined ? "n/a" : fmt(s.median))
      row.push(withErrors(`${one(p("p50"))} / ${one(p("p95"))} / ${one(p("p99"))}`, errorsOf(result, c.name, "W3")))
    }
    if (hasKind(result, "W4")) row.push(withErrors(cell(metric(result, c.name, "W4", "seconds")), errorsOf(result, c.name, "W4")))
    if (hasKind(result, "W2", 1)) {
      row.push(cell(metric(result, c.name, "W2", "peakRssMb", 1), (v) => v.toFixed(0)))
      const m = (k: string) => metric(result, c.name, "W2", k, 1)?.median
      row.push(`${fmt(m("workerCpuMsPer1000"))} + ${c.store === "sqlite" ? "–" : fmt(m("serverCpuMsPer1000"))}`)
      if (c.store === "pg") {
        row.push(`${fmt(m("xactsPerJob"))} · ${fmt(m("rowsWrittenPerJob"))} · ${fmt(m("statementsPerJob"))}`)
      } else if (c.store === "redis") {
        row.push(`${fmt(m("redisCommandsPerJob"))} Redis commands`)
      } else {
        row.push(`– · – · ${fmt(m("statementsPerJob"))}`)
      }
    }
    row.push(onceCell(result, c.name))
    return row
  })
  return table(head, rows)
}

const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string =>
  [
    `| ${head.join(" | ")} |`,
    `| ${head.map((_, i) => (i === 0 ? "---" : "---:")).join(" | ")} |`,
    ...rows.map((r) => `| ${r.join(" | ")} |`)
  ].join("\n")

const w5Table = (result: Result): string | undefined => {
  const procs = [...new Set(result.samples.filter((s) => s.kind === "W2").map((s) => s.procs))].sort((a, b) => a - b)
  if (!procs.includes(4)) return undefined
  const names = [...new Set(result.samples.filter((s) => s.kind === "W2" && s.procs === 4).map((s) => s.contender))]
  const head = [
    "Contender",
    ...procs.map((p) => `${p} proc${p > 1 ? "s" : ""} jobs/s`),
    "vs 1 proc",
    `CPU ms per 1,000 jobs, worker + server (${procs.join(" / ")})`,
    `connections per process (${procs.join(" / ")})`
  ]
  const rows = result.contenders.filter((c) => names.includes(c.name as Name)).map((c) => {
    const rate = (p: number) => metric(result, c.name, "W2", "rate", p)
    const base = rate(1)?.median
    return [
      c.label,
      ...procs.map((p) => withErrors(cell(rate(p)), errorsOf(result, c.name, "W2", p))),
      procs.map((p) => (base === undefined || rate(p) === undefined ? "n/a" : `${(rate(p)!.median / base).toFixed(2)}x`)).join(" / "),
      procs.map((p) => {
        const w = metric(result, c.name, "W2", "workerCpuMsPer1000", p)?.median
        const d = metric(result, c.name, "W2", "serverCpuMsPer1000", p)?.median
        return `${fmt(w)} + ${fmt(d)}`
      }).join(" / "),
      procs.map((p) => fmt(metric(result, c.name, "W2", "connectionsPerProcess", p)?.median)).join(" / ")
    ]
  })
  return table(head, rows)
}

/** W6 beside W2 (1 process) of the same run: the drain with and without the backlog. */
const w6Table = (result: Result): string | undefined => {
  if (!hasKind(result, "W6")) return undefined
  const head = [
    "Contender",
    "W6 drain jobs/s ↑",
    "W2 drain jobs/s, 1 proc ↑",
    "W6 / W2",
    "claim ms per statement, W6 / W2 ↓",
    "claim ms per 1,000 jobs, W6 / W2 ↓",
    "claim of 10 alone ms, W6 / W2 ↓",
    "backlog build s"
  ]
  const names = new Set(result.samples.filter((s) => s.kind === "W6").map((s) => s.contender))
  const rows = result.contenders.filter((c) => names.has(c.name as Name)).map((c) => {
    const w6 = metric(result, c.name, "W6", "rate")
    const w2 = metric(result, c.name, "W2", "rate", 1)
    const claim = (key: string, kind: RunKind, procs?: number) => fmt(metric(result, c.name, kind, key, procs)?.median)
    return [
      c.label,
      withErrors(cell(w6), errorsOf(result, c.name, "W6")),
      cell(w2),
      w6 === undefined || w2 === undefined ? "n/a" : `${(w6.median / w2.median).toFixed(2)}x`,
      `${claim("claimMs", "W6")} / ${claim("claimMs", "W2", 1)}`,
      `${claim("claimMsPer1000", "W6")} / ${claim("claimMsPer1000", "W2", 1)}`,
      `${claim("claimAloneMs", "W6")} / ${claim("claimAloneMs", "W2", 1)}`,
      fmt(metric(result, c.name, "W6", "buildSeconds")?.median)
    ]
  })
  return table(head, rows)
}

interface RatioColumn {
  readonly title: string
  readonly value: (name: string) => number | undefined
}

const ratioColumns = (result: Result): Array<RatioColumn> => {
  const m = (kind: RunKind, key: string, procs?: number) => (name: string) => metric(result, name, kind, key, procs)?.median
  const cols: Array<RatioColumn> = []
  if (hasKind(result, "W1")) {
    cols.push({ title: "W1 bulk ↑", value: m("W1", "bulkRate") }, { title: "W1 one-by-one ↑", value: m("W1", "oneRate") })
  }
  if (hasKind(result, "W2", 1)) cols.push({ title: "W2 1 proc ↑", value: m("W2", "rate", 1) })
  if (hasKind(result, "W2", 2)) cols.push({ title: "W2 2 procs ↑", value: m("W2", "rate", 2) })
  if (hasKind(result, "W3")) cols.push({ title: "W3 p50 ↓", value: m("W3", "p50") }, { title: "W3 p99 ↓", value: m("W3", "p99") })
  if (hasKind(result, "W4")) cols.push({ title: "W4 time ↓", value: m("W4", "seconds") })
  if (hasKind(result, "W2", 1)) cols.push({ title: "Peak RSS ↓", value: m("W2", "peakRssMb", 1) })
  return cols
}

const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || !Number.isFinite(a / b) ? "n/a" : `${(a / b).toFixed(a / b >= 10 ? 0 : 2)}x`

const ratioTable = (result: Result, docket: Contender): string => {
  const cols = ratioColumns(result)
  const peers = result.contenders.filter((c) => !c.docket && !c.baseline && result.samples.some((x) => x.contender === c.name))
  const rows = peers.map((p) => [`${docket.label} / ${p.label}`, ...cols.map((c) => ratio(c.value(docket.name), c.value(p.name)))])
  return table(["Ratio (↑: above 1x is Docket ahead; ↓: below 1x is Docket ahead)", ...cols.map((c) => c.title)], rows)
}

// --- targets ----------------------------------------------------------------

interface Target {
  readonly text: string
  readonly figure: string
  readonly met: boolean | undefined
}

const targets = (result: Result): Array<Target> => {
  const med = (name: string, kind: RunKind, key: string, procs?: number) => metric(result, name, kind, key, procs)?.median
  const has = (name: string) => result.contenders.some((c) => c.name === name)
  const out: Array<Target> = []
  const judge = (text: string, figure: string, met: boolean | undefined) => out.push({ text, figure, met })
  const pgPeers = result.contenders.filter((c) => !c.docket && !c.baseline && c.store === "pg").map((c) => c.name)
  const allPeers = result.contenders.filter((c) => !c.docket && !c.baseline).map((c) => c.name)
  const label = (name: string) => result.contenders.find((c) => c.name === name)?.label ?? name

  // W2 is one process and two: ahead of every peer means ahead in both. Not
  // met as soon as one count is behind; unknown (n/a) when a figure is missing
  // (Docket's run, or a peer's that ran but has no median) and none is behind.
  if (has("docket-pg") && hasKind(result, "W2", 1) && allPeers.length > 0) {
    const parts: Array<string> = []
    let behind = false
    let unknown = false
    for (const procs of [1, 2]) {
      const ran = allPeers.filter((p) => result.samples.some((s) => s.contender === p && s.kind === "W2" && s.procs === procs))
      if (ran.length === 0) continue
      const d = med("docket-pg", "W2", "rate", procs)
      const measured = ran.filter((p) => med(p, "W2", "rate", procs) !== undefined)
      if (measured.length < ran.length) unknown = true
      const processes = `${procs} process${procs === 1 ? "" : "es"}`
      if (d === undefined || measured.length === 0) {
        unknown = true
        parts.push(`${processes}: n/a`)
        continue
      }
      const next = measured.reduce((a, b) => (med(a, "W2", "rate", procs)! >= med(b, "W2", "rate", procs)! ? a : b))
      const n = med(next, "W2", "rate", procs)!
      parts.push(`${processes}: ${fmt(d)} vs next ${fmt(n)} jobs/s (${label(next)}) = ${ratio(d, n)}`)
      if (d <= n) behind = true
    }
    judge("W2 drain on PostgreSQL ahead of every peer", parts.join("; "), behind ? false : unknown ? undefined : true)
  }
  if (has("docket-pg") && has("graphile-worker-lq") && hasKind(result, "W2", 1)) {
    const d = med("docket-pg", "W2", "rate", 1)
    const g = med("graphile-worker-lq", "W2", "rate", 1)
    judge(
      "W2 drain on PostgreSQL ≥ 1.5x graphile-worker local queue",
      `${fmt(d)} vs ${fmt(g)} jobs/s = ${ratio(d, g)}`,
      d === undefined || g === undefined ? undefined : d >= 1.5 * g
    )
  }
  if (has("docket-pg") && hasKind(result, "W3")) {
    const p50 = med("docket-pg", "W3", "p50")
    const p99 = med("docket-pg", "W3", "p99")
    // The floor (no library) in the same run: what the two flushed commits cost here.
    const floor = has("pg-floor")
      ? ` (floor, no library: p50 ${fmt(med("pg-floor", "W3", "p50"))}, p99 ${fmt(med("pg-floor", "W3", "p99"))} ms)`
      : ""
    judge("W3 on PostgreSQL: p50 < 2 ms", `p50 ${fmt(p50)} ms${floor}`, p50 === undefined ? undefined : p50 < 2)
    judge("W3 on PostgreSQL: p99 < 10 ms", `p99 ${fmt(p99)} ms${floor}`, p99 === undefined ? undefined : p99 < 10)
    if (has("docket-sqlite")) {
      const s50 = med("docket-sqlite", "W3", "p50")
      const s99 = med("docket-sqlite", "W3", "p99")
      judge(
        "W3 on SQLite lower still (in-process enqueue)",
        `p50 ${fmt(s50)} ms, p99 ${fmt(s99)} ms (PostgreSQL ${fmt(p50)} / ${fmt(p99)})`,
        s50 === undefined || s99 === undefined || p50 === undefined || p99 === undefined ? undefined : s50 < p50 && s99 < p99
      )
    }
  }
  if (has("docket-pg") && hasKind(result, "W1")) {
    const d = med("docket-pg", "W1", "bulkRate")
    const gws = ["graphile-worker", "graphile-worker-lq"].filter(has)
    if (gws.length > 0) {
      const best = gws.reduce((a, b) => ((med(a, "W1", "bulkRate") ?? 0) >= (med(b, "W1", "bulkRate") ?? 0) ? a : b))
      const g = med(best, "W1", "bulkRate")
      judge(
        "W1 bulk ≥ 1.5x graphile-worker",
        `${fmt(d)} vs ${fmt(g)} jobs/s (${label(best)}) = ${ratio(d, g)}`,
        d === undefined || g === undefined ? undefined : d >= 1.5 * g
      )
    }
    const one = med("docket-pg", "W1", "oneRate")
    if (pgPeers.length > 0) {
      const best = pgPeers.reduce((a, b) => ((med(a, "W1", "oneRate") ?? 0) >= (med(b, "W1", "oneRate") ?? 0) ? a : b))
      const b = med(best, "W1", "oneRate")
      judge(
        "W1 one-by-one ≥ every PostgreSQL peer",
        `${fmt(one)} vs best peer ${fmt(b)} jobs/s (${label(best)}) = ${ratio(one, b)}`,
        one === undefined || b === undefined ? undefined : one >= b
      )
    }
  }
  if (has("docket-sqlite") && has("effect-pq-sqlite") && hasKind(result, "W2", 1)) {
    const d = med("docket-sqlite", "W2", "rate", 1)
    const e = med("effect-pq-sqlite", "W2", "rate", 1)
    judge(
      "W2 drain on SQLite ≥ 5x Effect PersistedQueue on SQLite",
      `${fmt(d)} vs ${fmt(e)} jobs/s = ${ratio(d, e)}`,
      d === undefined || e === undefined ? undefined : d >= 5 * e
    )
  }
  if (hasKind(result, "W2", 1) && allPeers.length > 0) {
    const lightest = allPeers.reduce((a, b) =>
      (med(a, "W2", "peakRssMb", 1) ?? Infinity) <= (med(b, "W2", "peakRssMb", 1) ?? Infinity) ? a : b
    )
    const l = med(lightest, "W2", "peakRssMb", 1)
    for (const d of ["docket-pg", "docket-sqlite"].filter(has)) {
      const r = med(d, "W2", "peakRssMb", 1)
      judge(
        `Peak RSS (${label(d)}) ≤ the lightest peer`,
        `${fmt(r)} MB vs ${fmt(l)} MB (${label(lightest)})`,
        r === undefined || l === undefined ? undefined : r <= l
      )
    }
  }
  return out
}

// --- details ---------------------------------------------------------------

const details = (result: Result): string => {
  const lines: Array<string> = []
  const n = result.options.sizes.drain
  const drainDetail = (c: Contender, last: Sample) => {
    const v = last.values
    lines.push(`**${c.label}** (W2, ${last.procs} process${last.procs > 1 ? "es" : ""}, run ${last.rep}): ` +
      `handler window ${fmt(v.handlerWindowMs)} ms, ` +
      `last handler end to store empty ${fmt(v.flushLagMs)} ms, worker start ${fmt(v.workerStartMs)} ms ` +
      `(${fmt(v.workerStartCpuMs)} ms CPU), ` +
      `worker CPU ${fmt(v.workerCpuMsPer1000)} ms and server CPU ${fmt(v.serverCpuMsPer1000)} ms per 1,000 jobs, ` +
      `max event-loop delay ${fmt(v.loopDelayMaxMs)} ms, RSS ${fmt(v.loadedRssMb)} MB once loaded and ` +
      `${fmt(v.peakRssMb)} MB at peak (V8 heap then ${fmt(v.heapUsedAtPeakMb)} MB used of ${fmt(v.heapTotalAtPeakMb)} MB)` +
      (c.store === "pg"
        ? `, per job: ${fmt(v.insertsPerJob)} inserted, ${fmt(v.updatesPerJob)} updated, ${fmt(v.deletesPerJob)} deleted rows` +
          `, ${fmt(v.xactsPerJob)} transactions; connections per process ${fmt(v.connectionsPerProcess)}`
        : ""))
    if (last.topStatements !== undefined && last.topStatements.length > 0) {
      lines.push("")
      lines.push("| statements | per 1,000 jobs | jobs per statement | mean ms | statement (start) |")
      lines.push("| ---: | ---: | ---: | ---: | --- |")
      for (const [text, count, ms] of last.topStatements.slice(0, 6)) {
        lines.push(
          `| ${count} | ${fmt((count / n) * 1000)} | ${fmt(n / count)} | ${fmt(ms / count)} | \`${
            text.replace(/\|/g, "\\|").slice(0, 80)
          }\` |`
        )
      }
    }
    const stats = last.libStats?.filter((s): s is Record<string, number> => s !== null && s !== undefined) ?? []
    if (stats.length > 0) {
      lines.push("", `Worker counters: ${stats.map((st) => Object.entries(st).map(([k, x]) => `${k} ${x}`).join(", ")).join("; ")}`)
    }
    lines.push("")
  }
  for (const c of result.contenders) {
    const procs = [...new Set(samplesOf(result, c.name, "W2").map((s) => s.procs))].sort((a, b) => a - b)
    // Every contender with one process; Docket also with its most processes.
    for (const p of c.docket ? [procs[0], procs[procs.length - 1]].filter((x, i, a) => a.indexOf(x) === i) : procs.slice(0, 1)) {
      const last = [...samplesOf(result, c.name, "W2", p)].reverse().find(ok)
      if (last !== undefined) drainDetail(c, last)
    }
  }
  if (hasKind(result, "W3")) {
    lines.push("**W3 split** at the enqueue call's return (its commit): the call's own time, and the pickup after it (medians over runs):", "")
    lines.push(
      "| Contender | enqueue call p50 ms | pickup p50 ms | pickup p99 ms | worst start ms | starts ≥ p95: over a GC pause / a loop stall only | worker GC pauses, count / longest ms |"
    )
    lines.push("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (const c of result.contenders) {
      const m = (k: string) => fmt(metric(result, c.name, "W3", k)?.median)
      const pct = (k: string) => {
        const v = metric(result, c.name, "W3", k)?.median
        return v === undefined ? "–" : `${Math.round(v * 100)}%`
      }
      lines.push(
        `| ${c.label} | ${m("enqueueCallP50")} | ${m("pickupP50")} | ${m("pickupP99")} | ${m("max")} | ${pct("tailGcShare")} / ${
          pct("tailStallShare")
        } | ${m("gcPauses")} / ${m("gcPauseMaxMs")} |`
      )
    }
    lines.push("")
  }
  const failures = result.samples.filter((s) => !ok(s))
  if (failures.length > 0) {
    lines.push("**Failed runs**", "")
    for (const s of failures) lines.push(`- ${s.contender} ${s.kind}${s.kind === "W2" ? ` ${s.procs}p` : ""} #${s.rep}: ${s.error!.split("\n")[0]}`)
    lines.push("")
  }
  return lines.join("\n")
}

// --- the document ------------------------------------------------------------

export const render = (result: Result, machine: Machine): string => {
  const o = result.options
  const s = o.sizes
  const out: Array<string> = []
  out.push(`### Run of ${machine.date}`)
  out.push("")
  out.push(
    `Machine: ${machine.cores} cores (${machine.cpu}), ${machine.memoryGb} GB RAM, load average at start ${machine.loadAverage}; ` +
      `Node ${machine.node}, PostgreSQL ${machine.postgres}, Redis ${machine.redis}; Docket at ${machine.commit}` +
      (machine.dirty.length > 0 ? ` with uncommitted changes in ${machine.dirty.join(", ")}.` : ".")
  )
  out.push("")
  out.push(`Packages: ${Object.entries(machine.packages).map(([k, v]) => `${k} ${v}`).join(", ")}.`)
  out.push("")
  if (pgSettings().length > 0) {
    out.push(`**Diagnostic run**: every fresh PostgreSQL database had ${pgSettings().map(([k, v]) => `${k} = ${v}`).join(", ")} (BENCH_PG_SET).`)
    out.push("")
  }
  out.push(
    `Sizes: W1 ${s.bulk.toLocaleString("en-US")} bulk + ${s.one.toLocaleString("en-US")} one by one ` +
      `(timed after ${s.oneWarmup.toLocaleString("en-US")} untimed); ` +
      `W2 ${s.drain.toLocaleString("en-US")} jobs; W3 ${s.latency} jobs ${s.latencyIntervalMs} ms apart ` +
      `(after ${s.latencyWarmup} untimed); ` +
      `W4 ${s.retry.toLocaleString("en-US")} jobs; concurrency ${s.concurrency} per worker process; ` +
      `${o.repeat} repetition${o.repeat > 1 ? "s" : ""}, cells are median (min–max). ` +
      `Run time ${(result.durationMs / 60000).toFixed(1)} min; load average at the end ${
        loadavg().map((l) => l.toFixed(2)).join(", ")
      }.`
  )
  out.push("")
  out.push(mainTable(result))
  out.push("")
  const w5 = w5Table(result)
  if (w5 !== undefined) {
    out.push("**W5 scale-out** (W2 with more worker processes, each at concurrency " + s.concurrency + "):")
    out.push("")
    out.push(w5)
    out.push("")
  }
  const w6 = w6Table(result)
  if (w6 !== undefined) {
    out.push(
      `**W6 big backlog** (W2's ${s.drain.toLocaleString("en-US")} due jobs, 1 process, in a store that also holds ` +
        `${backlogOf(s).waiting.toLocaleString("en-US")} waiting items due in a day and ${backlogOf(s).done.toLocaleString("en-US")} done items kept; ` +
        "claim = the claim statement's time in the worker, send to result, each claim a batch; " +
        "claim of 10 alone = the median of 15 claims of 10 items on the store before the workers start, each rolled back):"
    )
    out.push("")
    out.push(w6)
    out.push("")
  }
  for (const d of result.contenders.filter((c) => c.docket)) {
    if (result.contenders.some((c) => !c.docket && !c.baseline)) {
      out.push(`**${d.label} / peer** (medians):`)
      out.push("")
      out.push(ratioTable(result, d))
      out.push("")
    }
  }
  const t = targets(result)
  if (t.length > 0) {
    out.push("**Targets (issue 5)**")
    out.push("")
    out.push(table(["Target", "Measured", "Met"], t.map((x) => [x.text, x.figure, x.met === undefined ? "n/a" : x.met ? "met" : "**not met**"])))
    out.push("")
  }
  out.push("**Configurations**")
  out.push("")
  for (const c of result.contenders) out.push(`- ${c.label}: ${c.config}. W4 backoff: ${c.retryNote}.`)
  for (const sk of result.skipped) out.push(`- ${sk.name}: skipped, ${sk.reason}.`)
  out.push(
    `- Statements are counted in the worker processes (pg's Client.query, better-sqlite3's statement calls); ` +
      `pg_stat_statements is ${machine.pgStatStatements ? "loaded" : "not loaded on this server (needs shared_preload_libraries), so it is not used"}. ` +
      `Transactions and rows written come from pg_stat_database deltas over the worker run (the harness's own probe queries subtracted).`
  )
  out.push("")
  out.push("**Details**")
  out.push("")
  out.push(details(result))
  return out.join("\n")
}

const BEGIN = "<!-- bench:begin (generated by npm run bench; edits inside are overwritten) -->"
const END = "<!-- bench:end -->"

/** Replaces the generated part of docs/benchmarks.md (or writes the file with it). */
export const updateDocs = (path: string, markdown: string) => {
  const generated = `${BEGIN}\n${markdown}\n${END}`
  if (existsSync(path)) {
    const text = readFileSync(path, "utf8")
    const a = text.indexOf("<!-- bench:begin")
    const b = text.indexOf(END)
    if (a >= 0 && b > a) {
      writeFileSync(path, text.slice(0, a) + generated + text.slice(b + END.length))
      return
    }
    writeFileSync(path, `${text.trimEnd()}\n\n${generated}\n`)
    return
  }
  writeFileSync(path, `# Benchmarks\n\n${generated}\n`)
}
