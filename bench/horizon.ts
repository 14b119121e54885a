/**
 * W9 (issue 35): claims while vacuum is held back. See docs/benchmarks.md, "W9".
 *
 *   npx tsx bench/horizon.ts [--rounds 6] [--jobs 100000] [--only docket,graphile-worker,pg-boss,pg-boss-fast]
 *                            [--held both|yes|no] [--json]
 *
 * For each contender and each condition, a fresh database and one worker
 * process (the contender's library worker, concurrency 10, as W2 runs it);
 * then `--rounds` rounds, one after another: `--jobs` no-op items enqueued in
 * bulk, timed until the store is seen empty. "Held": a separate session has
 * `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1 FROM w9_hold` open from
 * before round 1 to the end (its backend_xmin checked to be set). Runs
 * alternate contender and condition, so drift spreads over both.
 *
 * Contenders: `docket` (docket-pg), `graphile-worker` (graphile-worker-lq: its
 * local queue and documented high-throughput settings), `pg-boss` (2 s poll)
 * and `pg-boss-fast` (LISTEN/NOTIFY, burst), each with its adapter's settings.
 *
 * Writes bench/results/horizon.md and horizon.json (gitignored); --json prints
 * the JSON instead of the table. Environment: BENCH_PG_URL (default
 * postgres://root@127.0.0.1:5432/postgres). Autovacuum should be on (the
 * server's default): the report says when it is not.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { join } from "node:path"
import { packageVersion } from "./adapters/types.js"
import { CONTENDERS, type HorizonContender, type HorizonRun, runHorizon } from "./lib/horizon.js"
import { closeAdmin, type Env, pgServerVersion } from "./lib/stores.js"
import { PROJECT_DIR } from "./lib/workers.js"
import pg from "pg"

interface Cli {
  readonly rounds: number
  readonly jobs: number
  readonly contenders: ReadonlyArray<HorizonContender>
  readonly held: ReadonlyArray<boolean>
  readonly json: boolean
}

const parseArgs = (argv: ReadonlyArray<string>): Cli => {
  let rounds = 6
  let jobs = 100_000
  let contenders = CONTENDERS
  let held: ReadonlyArray<boolean> = [false, true]
  let json = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => {
      const v = argv[++i]
      if (v === undefined) throw new Error(`${arg} needs a value`)
      return v
    }
    const count = (v: string) => {
      const n = Number(v)
      if (!Number.isInteger(n) || n < 1) throw new Error(`${arg} needs a positive integer`)
      return n
    }
    switch (arg) {
      case "--rounds":
        rounds = count(value())
        break
      case "--jobs":
        jobs = count(value())
        break
      case "--only": {
        const names = value().split(",").map((s) => s.trim()).filter(Boolean)
        const unknown = names.filter((n) => !CONTENDERS.some((c) => c.name === n))
        if (unknown.length > 0) {
          throw new Error(`unknown contender(s) ${unknown.join(", ")}; known: ${CONTENDERS.map((c) => c.name).join(", ")}`)
        }
        contenders = CONTENDERS.filter((c) => names.includes(c.name))
        break
      }
      case "--held": {
        const v = value()
        if (v !== "both" && v !== "yes" && v !== "no") throw new Error("--held is both, yes or no")
        held = v === "both" ? [false, true] : [v === "yes"]
        break
      }
      case "--json":
        json = true
        break
      case "--help":
      case "-h":
        console.log(
          "usage: npx tsx bench/horizon.ts [--rounds n] [--jobs n] [--only names] [--held both|yes|no] [--json]\n" +
            `contenders: ${CONTENDERS.map((c) => c.name).join(", ")}; defaults: 6 rounds of 100,000, all, both`
        )
        process.exit(0)
        break
      default:
        throw new Error(`unknown argument ${arg} (try --help)`)
    }
  }
  return { rounds, jobs, contenders, held, json }
}

/**
 * The runs' order: contender by contender, the condition alternating from one
 * run to the next and the pass over the contenders repeated with the other
 * condition first (held, not held, held; then not held, held, not held).
 */
const order = <C>(contenders: ReadonlyArray<C>, held: ReadonlyArray<boolean>) =>
  held.flatMap((_, pass) => contenders.map((c, i) => ({ contender: c, held: held[(i + pass + 1) % held.length] })))

const serverSettings = async (url: string) => {
  const client = new pg.Client({ connectionString: url, application_name: "w9-admin" })
  await client.connect()
  try {
    const { rows } = await client.query(
      `select name, setting from pg_settings where name in
         ('autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_threshold', 'shared_buffers', 'fsync')`
    )
    return Object.fromEntries(rows.map((r) => [r.name as string, r.setting as string]))
  } finally {
    await client.end()
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US")
const loadText = (l: ReadonlyArray<number>) => l.map((x) => x.toFixed(2)).join(", ")

const render = (runs: ReadonlyArray<HorizonRun>, cli: Cli, header: string): string => {
  const lines = [header, ""]
  const rounds = Array.from({ length: cli.rounds }, (_, r) => `round ${r + 1}`)
  const table = (title: string, pick: (run: HorizonRun, r: number) => number) => {
    lines.push(title, "")
    lines.push(`| contender | horizon | ${rounds.join(" | ")} | last / first | dead tuples at end: n_dead_tup / left | queue table at end | load average, start / end |`)
    lines.push(`| --- | --- | ${rounds.map(() => "---:").join(" | ")} | ---: | ---: | ---: | --- |`)
    for (const c of cli.contenders) {
      for (const held of cli.held) {
        const run = runs.find((x) => x.contender === c.name && x.held === held)
        if (run === undefined) continue
        const cells = rounds.map((_, r) => (run.rounds[r] === undefined ? "–" : fmt(pick(run, r))))
        const first = run.rounds[0]
        const last = run.rounds[run.rounds.length - 1]
        const ratio = first === undefined || last === undefined ? "–" : `${(pick(run, run.rounds.length - 1) / pick(run, 0)).toFixed(2)}x`
        const end = run.end === undefined
          ? "–"
          : `${fmt(run.end.deadTup)} / ${run.deadLeft === undefined ? "–" : fmt(run.deadLeft)}`
        const size = run.end === undefined ? "–" : `${(run.end.bytes / 1024 / 1024).toFixed(0)} MB`
        const note = run.error !== undefined
          ? ` (FAILED: ${run.error.split("\n")[0]})`
          : run.once?.ok === false
          ? ` (CHECK FAILED: ${run.once.detail})`
          : run.holder !== undefined && !run.holder.stillHeld
          ? " (the holder lost its snapshot)"
          : ""
        lines.push(
          `| ${c.name}${note} | ${held ? "held" : "not held"} | ${cells.join(" | ")} | ${ratio} | ${end} | ${size} | ` +
            `${loadText(run.loadAverage.start.slice(0, 1))} / ${loadText(run.loadAverage.end.slice(0, 1))} |`
        )
      }
    }
    lines.push("")
  }
  table(`**Drain, ms** (from the enqueue's end, or the round's first start if later, to the store seen empty):`, (run, r) => run.rounds[r].drainMs)
  table(`**Enqueue + drain, ms** (from the enqueue's start to the store seen empty; workers start during the enqueue):`, (run, r) => run.rounds[r].totalMs)
  return lines.join("\n")
}

const main = async () => {
  const cli = parseArgs(process.argv.slice(2))
  const env: Env = {
    pgAdminUrl: process.env.BENCH_PG_URL ?? process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres",
    redisUrl: "",
    redisDb: 0
  }
  const log = (line: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`)
  const settings = await serverSettings(env.pgAdminUrl)
  if (settings.autovacuum !== "on") log(`WARNING: autovacuum is ${settings.autovacuum} on this server; W9 asks for it on`)
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: PROJECT_DIR, encoding: "utf8" }).trim()
  const machine = {
    cpus: cpus().length,
    cpu: cpus()[0]?.model ?? "?",
    node: process.version,
    postgres: await pgServerVersion(env),
    settings,
    commit,
    packages: Object.fromEntries(["graphile-worker", "pg-boss", "pg"].map((n) => [n, packageVersion(n) ?? "?"])),
    loadAverageAtStart: loadavg()
  }
  const startedAt = new Date()
  log(`W9: ${cli.contenders.map((c) => c.name).join(", ")}; ${cli.rounds} rounds of ${fmt(cli.jobs)}; load average ${loadText(loadavg())}`)
  const runs: Array<HorizonRun> = []
  try {
    for (const step of order(cli.contenders, cli.held)) {
      const run = await runHorizon(step.contender, step.held, { env, rounds: cli.rounds, jobs: cli.jobs, concurrency: 10, log })
      if (run.error !== undefined) log(`${step.contender.name} ${step.held ? "held" : "not held"}: FAILED ${run.error}`)
      if (run.once?.ok === false) log(`${step.contender.name}: CHECK FAILED ${run.once.detail}`)
      runs.push(run)
    }
  } finally {
    await closeAdmin()
  }
  const minutes = (Date.now() - startedAt.getTime()) / 60_000
  const header =
    `W9 (issue 35), ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC: ${cli.rounds} rounds of ${fmt(cli.jobs)} no-op items, ` +
    `one round after another in one database per run, one worker process at concurrency 10; "held" = a REPEATABLE READ session ` +
    `with a snapshot (backend_xmin set) open from before round 1 to the end. PostgreSQL ${machine.postgres}, autovacuum ` +
    `${settings.autovacuum} (naptime ${settings.autovacuum_naptime} s, scale factor ${settings.autovacuum_vacuum_scale_factor}); ` +
    `${machine.cpus} cores (${machine.cpu}); Node ${machine.node}; Docket at ${commit}; graphile-worker ` +
    `${machine.packages["graphile-worker"]}, pg-boss ${machine.packages["pg-boss"]}. Run time ${minutes.toFixed(1)} min; ` +
    `load average at start ${loadText(machine.loadAverageAtStart)}, at end ${loadText(loadavg())}. Dead tuples: the queue ` +
    `table's n_dead_tup (pg_stat_user_tables, partitions summed) after the worker stopped, and the dead row versions ` +
    `left in it (pgstattuple, whose scan first prunes what the horizon allows).`
  const markdown = render(runs, cli, header)
  const dir = join(PROJECT_DIR, "bench", "results")
  mkdirSync(dir, { recursive: true })
  const json = JSON.stringify({ machine, options: { rounds: cli.rounds, jobs: cli.jobs }, runs }, null, 2)
  writeFileSync(join(dir, "horizon.md"), markdown)
  writeFileSync(join(dir, "horizon.json"), json)
  console.log(cli.json ? json : `\n${markdown}`)
  log("wrote bench/results/horizon.md and horizon.json")
  if (runs.some((r) => r.error !== undefined || r.once?.ok === false)) process.exitCode = 1
}

main().catch(async (error) => {
  console.error(error instanceof Error ? error.message : error)
  await closeAdmin().catch(() => {})
  process.exit(2)
})
