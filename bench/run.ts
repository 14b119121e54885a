/**
 * `npm run bench`: Docket against its peers (issue 5). See docs/benchmarks.md.
 *
 *   npm run bench                          everything, default sizes, 3 repetitions
 *   npm run bench -- --quick               tiny sizes (a check that every contender works)
 *   npm run bench -- --only docket-pg,graphile-worker-lq --workloads W2,W3 --repeat 5
 *
 * Flags: --quick, --only <names>, --workloads <W1,..,W6>, --repeat <n>,
 * --jobs <n> (W2/W5/W6 drain size), --backlog <n> (W6: waiting and done items, each), --max-run-seconds <s> (a run slower than this
 * is not repeated; default 30, 0 = always repeat), --docs / --no-docs (rewrite the generated part
 * of docs/benchmarks.md; default: only after a full default run), --json.
 * Environment: BENCH_PG_URL (default postgres://root@127.0.0.1:5432/postgres),
 * BENCH_REDIS_URL (default redis://127.0.0.1:6379), BENCH_REDIS_DB (default 15).
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { ALL, isName, KNOWN, type Name, OPT_IN } from "./adapters/registry.js"
import { DEFAULT_SIZES, type Options, QUICK_SIZES, run, type Sizes, type Workload, WORKLOADS } from "./lib/harness.js"
import { machineInfo, render, updateDocs } from "./lib/report.js"
import { closeAdmin } from "./lib/stores.js"
import { PROJECT_DIR } from "./lib/workers.js"

export interface Cli {
  readonly options: Options
  readonly docs: boolean | undefined
  readonly json: boolean
  readonly full: boolean
}

export const parseArgs = (argv: ReadonlyArray<string>): Cli => {
  let contenders: ReadonlyArray<Name> = ALL
  let workloads: ReadonlyArray<Workload> = WORKLOADS
  let repeat = 3
  let sizes: Sizes = DEFAULT_SIZES
  let docs: boolean | undefined
  let json = false
  let quick = false
  let jobs: number | undefined
  let backlog: number | undefined
  let maxRunSeconds = 30
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => {
      const v = argv[++i]
      if (v === undefined) throw new Error(`${arg} needs a value`)
      return v
    }
    switch (arg) {
      case "--quick":
        quick = true
        sizes = QUICK_SIZES
        break
      case "--only": {
        const names = value().split(",").map((s) => s.trim()).filter(Boolean)
        const unknown = names.filter((n) => !isName(n))
        if (unknown.length > 0) throw new Error(`unknown contender(s) ${unknown.join(", ")}; known: ${KNOWN.join(", ")}`)
        contenders = names as Array<Name>
        break
      }
      case "--workloads": {
        const names = value().split(",").map((s) => s.trim().toUpperCase()).filter(Boolean)
        const unknown = names.filter((n) => !(WORKLOADS as ReadonlyArray<string>).includes(n))
        if (unknown.length > 0) throw new Error(`unknown workload(s) ${unknown.join(", ")}; known: ${WORKLOADS.join(", ")}`)
        workloads = names as Array<Workload>
        break
      }
      case "--repeat":
        repeat = Number(value())
        if (!Number.isInteger(repeat) || repeat < 1) throw new Error("--repeat needs a positive integer")
        break
      case "--jobs":
        jobs = Number(value())
        if (!Number.isInteger(jobs) || jobs < 1) throw new Error("--jobs needs a positive integer")
        break
      case "--backlog":
        backlog = Number(value())
        if (!Number.isInteger(backlog) || backlog < 0) throw new Error("--backlog needs an integer >= 0")
        break
      case "--max-run-seconds":
        maxRunSeconds = Number(value())
        if (!Number.isFinite(maxRunSeconds) || maxRunSeconds < 0) throw new Error("--max-run-seconds needs a number >= 0")
        break
      case "--docs":
        docs = true
        break
      case "--no-docs":
        docs = false
        break
      case "--json":
        json = true
        break
      case "--help":
      case "-h":
        console.log(
          "usage: npm run bench -- [--quick] [--only names] [--workloads W1,W2,W3,W4,W5,W6] [--repeat n] [--jobs n] [--backlog n] [--max-run-seconds s] [--docs|--no-docs] [--json]\n" +
            `contenders: ${ALL.join(", ")}\nonly when named: ${OPT_IN.join(", ")}`
        )
        process.exit(0)
        break
      default:
        throw new Error(`unknown argument ${arg} (try --help)`)
    }
  }
  if (jobs !== undefined) sizes = { ...sizes, drain: jobs }
  if (backlog !== undefined) sizes = { ...sizes, backlogWaiting: backlog, backlogDone: backlog }
  const full = !quick && jobs === undefined && backlog === undefined && contenders.length === ALL.length && ALL.every((n) => contenders.includes(n)) && workloads.length === WORKLOADS.length
  return {
    options: {
      contenders,
      workloads,
      repeat,
      sizes,
      maxRunSeconds,
      env: {
        pgAdminUrl: process.env.BENCH_PG_URL ?? process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres",
        redisUrl: process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379",
        redisDb: Number(process.env.BENCH_REDIS_DB ?? 15)
      }
    },
    docs,
    json,
    full
  }
}

const main = async () => {
  const cli = parseArgs(process.argv.slice(2))
  const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`)
  const machine = await machineInfo(cli.options.env)
  log(`bench: ${cli.options.contenders.join(", ")}; ${cli.options.workloads.join(", ")}; repeat ${cli.options.repeat}`)
  const result = await run({ ...cli.options, log })
  await closeAdmin()
  const markdown = render(result, machine)
  console.log(`\n${markdown}`)
  const dir = join(PROJECT_DIR, "bench", "results")
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "latest.md"), markdown)
  if (cli.json) writeFileSync(join(dir, "latest.json"), JSON.stringify({ machine, result }, null, 2))
  log(`wrote bench/results/latest.md`)
  if (cli.docs ?? cli.full) {
    updateDocs(join(PROJECT_DIR, "docs", "benchmarks.md"), markdown)
    log(`wrote docs/benchmarks.md`)
  }
  log(`total ${(result.durationMs / 1000).toFixed(0)} s`)
  const failed = result.samples.filter((s) => s.error !== undefined || s.once?.ok === false)
  if (failed.some((s) => result.contenders.find((c) => c.name === s.contender)?.docket)) process.exitCode = 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch(async (error) => {
    console.error(error instanceof Error ? error.message : error)
    await closeAdmin().catch(() => {})
    process.exit(2)
  })
}
