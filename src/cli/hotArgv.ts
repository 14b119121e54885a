/**
 * The command lines of `docket enqueue` and `docket stats`, the commands
 * scripts run again and again, and of `docket worker`, the long-running one,
 * parsed by hand, so that they start without @effect/cli: its parser and what
 * it imports (the help printer, yaml, toml and ini for its config files,
 * every command's definition) are about a third of the modules such a
 * command loaded, and a worker at rest holds them for its whole life (about
 * 6 MB of its resident memory: docs/benchmarks.md, issue 34).
 *
 * Only plain, well-formed command lines are read here: the command first,
 * its own flags (`--flag value`, `--flag=value`, `-d value`), each at most
 * once, with values that read, and at most its positional arguments. Any
 * other line (help, a built-in flag, an unknown or repeated flag, a value
 * that is missing, empty, starts with `-` or does not read, `--`, an extra
 * argument; `-` alone is a value: stdin for `--from`) gets `undefined`, and the command goes through @effect/cli as
 * every other command does (run.ts): so help, every usage error and its
 * exit code are @effect/cli's and run.ts's, unchanged. What a line read
 * here gives the command is what @effect/cli gives it for the same line
 * (test/cli/hotArgv.test.ts compares the two).
 */
import * as Either from "effect/Either"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Horizon from "../internal/horizon.js"
import * as PgSchema from "../internal/pgSchema.js"
import * as V from "../internal/validate.js"
import type { EnqueueArgs } from "./commands/enqueueOptions.js"
import type { StatsArgs } from "./commands/statsRun.js"
import { WORKER_DEFAULTS, type WorkerArgs } from "./commands/workerOptions.js"
import { parseDuration, parseTime } from "./input.js"
import { LOG_FORMATS } from "./logFormat.js"
import { takeLogLevel } from "./logLevel.js"
import { parseRetention } from "./retention.js"
import { HORIZON_TRANSACTIONS_BOUNDS, readInteger } from "./values.js"

/** A command line read here: the command, its arguments, and the global `--log-level`. */
export type HotCommand =
  & { readonly level: Option.Option<LogLevel.LogLevel> }
  & (
    | { readonly command: "enqueue"; readonly args: EnqueueArgs }
    | { readonly command: "stats"; readonly args: StatsArgs }
    | { readonly command: "worker"; readonly args: WorkerArgs }
  )

/** A flag: the field it sets, and how its value reads (undefined: it does not; `true`: a flag without a value). */
interface Flag {
  readonly field: string
  readonly read: ((text: string) => unknown) | true
}

const text = (value: string): unknown => value
const right = <A>(either: Either.Either<A, unknown>): A | undefined => Either.getOrUndefined(either)
const duration = (name: string) => (value: string) => right(parseDuration(name, value))
const time = (name: string) => (value: string) => right(parseTime(name, value))
const integer = (name: string, bounds: { readonly min: number; readonly max: number }) => (value: string) =>
  right(readInteger(name, value, bounds))

const logFormat = (value: string) => (LOG_FORMATS as ReadonlyArray<string>).includes(value.trim()) ? value.trim() : undefined
// `off`, or a duration of at least 100ms (worker.ts's --summary).
const summary = (value: string): number | null | undefined => {
  if (value.trim() === "off") return null
  const ms = right(parseDuration("--summary", value))
  return ms === undefined || ms < 100 ? undefined : ms
}
const HORIZON: Record<string, Flag> = {
  "--horizon-age": { field: "horizonAge", read: duration("--horizon-age") },
  "--horizon-transactions": {
    field: "horizonTransactions",
    read: integer("--horizon-transactions", HORIZON_TRANSACTIONS_BOUNDS)
  }
}

const onConflict = (value: string) => (V.ON_CONFLICT_MODES as ReadonlyArray<string>).includes(value) ? value : undefined

const DATABASE: Record<string, Flag> = {
  "--database": { field: "url", read: text },
  "-d": { field: "url", read: text },
  "--schema": { field: "schema", read: (value) => right(PgSchema.check(value)) }
}

interface Spec {
  readonly flags: Record<string, Flag>
  readonly positionals: number
}

const SPECS: Record<HotCommand["command"], Spec> = {
  enqueue: {
    flags: {
      ...DATABASE,
      "--key": { field: "key", read: text },
      "--on-conflict": { field: "onConflict", read: onConflict },
      "--group": { field: "group", read: text },
      "--delay": { field: "delay", read: duration("--delay") },
      "--run-at": { field: "runAt", read: time("--run-at") },
      "--priority": { field: "priority", read: integer("--priority", { min: -V.MAX_PRIORITY, max: V.MAX_PRIORITY }) },
      "--max-attempts": { field: "maxAttempts", read: integer("--max-attempts", { min: 1, max: V.MAX_ATTEMPTS_LIMIT }) },
      "--from": { field: "from", read: text }
    },
    positionals: 2
  },
  stats: {
    flags: {
      ...DATABASE,
      "--json": { field: "json", read: true },
      ...HORIZON
    },
    positionals: 0
  },
  worker: {
    flags: {
      ...DATABASE,
      ...HORIZON,
      "--tasks": { field: "tasks", read: text },
      "--listen-database": { field: "listenDatabase", read: text },
      "--concurrency": { field: "concurrency", read: integer("--concurrency", { min: 1, max: Number.MAX_SAFE_INTEGER }) },
      "--lease": { field: "lease", read: duration("--lease") },
      "--poll": { field: "poll", read: duration("--poll") },
      "--grace": { field: "grace", read: duration("--grace") },
      "--retention": { field: "retention", read: (value) => right(parseRetention(value)) },
      "--log-items": { field: "logItems", read: true },
      "--log-format": { field: "logFormat", read: logFormat },
      "--summary": { field: "summary", read: summary },
      "--all-kinds": { field: "allKinds", read: true }
    },
    positionals: 0
  }
}

/** The flags' values by field, and the positional arguments; undefined when the line is not plain. */
const readLine = (spec: Spec, args: ReadonlyArray<string>) => {
  const values = new Map<string, unknown>()
  const positionals: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === "") return undefined
    if (!arg.startsWith("-")) {
      positionals.push(arg)
      continue
    }
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1
    const name = eq < 0 ? arg : arg.slice(0, eq)
    const flag = Object.hasOwn(spec.flags, name) ? spec.flags[name] : undefined
    if (flag === undefined || values.has(flag.field)) return undefined
    if (flag.read === true) {
      if (eq >= 0) return undefined
      values.set(flag.field, true)
      continue
    }
    const value = eq >= 0 ? arg.slice(eq + 1) : args[++i]
    if (value === undefined || value === "" || (eq < 0 && value.startsWith("-") && value !== "-")) return undefined
    const read = flag.read(value)
    if (read === undefined) return undefined
    values.set(flag.field, read)
  }
  return positionals.length > spec.positionals ? undefined : { values, positionals }
}

const optional = <A>(values: Map<string, unknown>, field: string): Option.Option<A> =>
  values.has(field) ? Option.some(values.get(field) as A) : Option.none()

const orDefault = <A>(values: Map<string, unknown>, field: string, fallback: A): A =>
  values.has(field) ? values.get(field) as A : fallback

const workerArgs = (
  values: Map<string, unknown>,
  database: WorkerArgs["database"],
  horizon: Pick<WorkerArgs, "horizonAge" | "horizonTransactions">
): WorkerArgs => ({
  tasks: values.get("tasks") as string,
  database,
  listenDatabase: optional(values, "listenDatabase"),
  concurrency: orDefault(values, "concurrency", WORKER_DEFAULTS.concurrency),
  lease: orDefault(values, "lease", WORKER_DEFAULTS.lease),
  poll: orDefault(values, "poll", WORKER_DEFAULTS.poll),
  grace: orDefault(values, "grace", WORKER_DEFAULTS.grace),
  retention: orDefault(values, "retention", {}),
  logItems: values.has("logItems"),
  logFormat: orDefault(values, "logFormat", "text"),
  summary: orDefault(values, "summary", WORKER_DEFAULTS.summary),
  allKinds: values.has("allKinds"),
  ...horizon
})

/**
 * The command line (the arguments after `node` and the script) read by hand,
 * or undefined: then @effect/cli parses it (run.ts).
 */
export const parseHot = (argv: ReadonlyArray<string>): HotCommand | undefined => {
  const global = takeLogLevel(argv)
  if (Either.isLeft(global)) return undefined
  const { level, rest } = global.right
  const command = rest[0]
  if (command !== "enqueue" && command !== "stats" && command !== "worker") return undefined
  const line = readLine(SPECS[command], rest.slice(1))
  if (line === undefined) return undefined
  const { positionals, values } = line
  const database = { url: optional<string>(values, "url"), schema: optional<string>(values, "schema") }
  const horizon = {
    horizonAge: (values.get("horizonAge") as number | undefined) ?? Horizon.DEFAULT_AGE_MS,
    horizonTransactions: (values.get("horizonTransactions") as number | undefined) ?? Horizon.DEFAULT_TRANSACTIONS
  }
  if (command === "stats") return { command, level, args: { database, json: values.has("json"), ...horizon } }
  if (command === "worker") {
    if (!values.has("tasks")) return undefined
    return { command, level, args: workerArgs(values, database, horizon) }
  }
  const args: EnqueueArgs = {
    database,
    kind: Option.fromNullable(positionals[0]),
    payload: Option.fromNullable(positionals[1]),
    key: optional(values, "key"),
    onConflict: optional(values, "onConflict"),
    group: optional(values, "group"),
    delay: optional(values, "delay"),
    runAt: optional(values, "runAt"),
    priority: optional(values, "priority"),
    maxAttempts: optional(values, "maxAttempts"),
    from: optional(values, "from")
  }
  return { command, level, args }
}
