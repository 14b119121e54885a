/**
 * Task files: `<dir>/<kind>.{ts,mts,cts,js,mjs,cjs}`, one kind each (the kind is the
 * file name, dots allowed: `mirror.refresh.ts` runs items of kind
 * `mirror.refresh`). A file default-exports either
 *
 * - a Docket handler (`Handler.make(...)` or `Handler.fromPromise(...)`); its
 *   kind must be the file's kind, or
 * - a plain `async (payload, job) => {}` function: it gets the payload as
 *   stored (any JSON) and a throw or rejection is a retry (throwing Docket's
 *   `Permanent` or `Cancel` makes the item dead at once; throwing
 *   `new Snooze({ delay })` puts it back for that long, attempt not
 *   counted). Such a file may also export `options`:
 *   `{ maxAttempts, backoff, timeout, concurrency, maxSnoozes, global, perGroup, transactional }`,
 *   where `backoff` is a duration (`"200ms"`, or milliseconds) for a constant
 *   delay, `{ base, factor, max, jitter }` for an exponential one, or a
 *   Backoff policy function; `timeout` is a duration; `global` the limits
 *   across every process, `{ concurrency, rate }` with the rate as `"100/1m"`
 *   or `{ limit, period }` (as `Handler.Options.global`). (`maxAttempts`, as for
 *   any handler, applies to every item of the kind enqueued without its own,
 *   `docket enqueue` without `--max-attempts` included; else the queue's 8.
 *   `maxSnoozes`, an integer from 0, caps an item's snoozes; default 100.
 *   `perGroup`, `{ concurrency, ordered?, onFailure?, onDead?, rate? }`, limits each group of the kind,
 *   as `Handler.Options.perGroup`. `transactional: true` runs the function in
 *   the transaction that completes its item, as `Handler.Options.transactional`:
 *   its statements go through its third argument, `tx.query(text, params)`.)
 *
 * A task file may also export `recurring`: a schedule enqueuing items of its
 * kind (the schedule's name is the kind), as a cron expression
 * (`export const recurring = "0 6 * * *"`) or `{ cron, payload, tz, missed }`
 * (as `Recurring.make`'s options). It is checked when the file is loaded: a
 * bad one names the file and the schedule.
 *
 * Files whose name starts with `_` or `.` are helpers, not tasks; `.d.ts`
 * files are skipped. A task file may be an ES module (`export default`) or
 * CommonJS (`module.exports = fn`), whatever the enclosing package's "type":
 * `.mjs`/`.mts` are ES modules and `.cjs`/`.cts` CommonJS as everywhere in
 * Node, and a `.ts` or `.js` file outside a `"type": "module"` package is read
 * through tsx's CommonJS hooks, which take `import`/`export` too. (Only a `.js`
 * file using `module.exports` inside a `"type": "module"` package fails, and
 * Node's message says to rename it `.cjs`.) Task handlers can need no
 * services (nothing provides them).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schedule from "effect/Schedule"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as Backoff from "../Backoff.js"
import type { GlobalLimits, PerGroup } from "../Domain.js"
import { checkLimits, checkPerGroup } from "../internal/store/kinds.js"
import * as Handler from "../Handler.js"
import * as Recurring from "../Recurring.js"
import * as V from "../internal/validate.js"
import { usage, type UsageError } from "./errors.js"
import { compareText } from "./format.js"
import { parseDuration, parseRate } from "./input.js"
import { describeLoadError } from "./loadError.js"

const TASK_FILE = /^(?![_.])(.+)\.(ts|mts|cts|js|mjs|cjs)$/

/**
 * The handler of a task file. It can need no services (nothing provides them
 * to a task file), so its requirements are `never`.
 */
export type TaskHandler = Handler.Handler<any, any, unknown, never, any, any>

/** A task file and the kind its name gives. */
export interface TaskFile {
  readonly kind: string
  readonly path: string
}

/** The task files of a folder, sorted by kind; bad names and duplicate kinds are refused. */
export const listTaskFiles = (dir: string): Effect.Effect<ReadonlyArray<TaskFile>, UsageError> =>
  Effect.suspend(() => {
    const root = resolve(dir)
    if (!existsSync(root)) return Effect.fail(usage(`--tasks: folder ${dir} does not exist`))
    if (!statSync(root).isDirectory()) return Effect.fail(usage(`--tasks: ${dir} is not a folder`))
    const files: Array<TaskFile> = []
    const seen = new Map<string, string>()
    for (const name of readdirSync(root).sort()) {
      if (/\.d\.[cm]?ts$/.test(name)) continue
      const match = TASK_FILE.exec(name)
      if (match === null) continue
      const path = join(root, name)
      if (!statSync(path).isFile()) continue
      const kind = match[1]
      const checked = V.checkKind(kind)
      if (Either.isLeft(checked)) {
        return Effect.fail(usage(`task file ${name}: its name is not a valid kind (${checked.left.reason})`))
      }
      const other = seen.get(kind)
      if (other !== undefined) return Effect.fail(usage(`task files ${other} and ${name} are both for kind ${kind}`))
      seen.set(kind, name)
      files.push({ kind, path })
    }
    if (files.length === 0) {
      return Effect.fail(usage(`--tasks: no task files (<kind>.ts, .mts, .cts, .js, .mjs or .cjs) in ${dir}`))
    }
    return Effect.succeed(files.sort((a, b) => compareText(a.kind, b.kind)))
  })

const isHandler = (value: unknown): value is Handler.Any =>
  typeof value === "object" && value !== null && typeof (value as Handler.Any).run === "function" &&
  typeof (value as Handler.Any).kind === "string" && (value as Handler.Any).payload !== undefined

const durationOption = (file: string, name: string, value: unknown): Either.Either<Duration.Duration, UsageError> => {
  const refuse = (why: string) => Either.left(usage(`task file ${file}: options.${name} ${why}`))
  if (Duration.isDuration(value)) return Either.right(value)
  if (typeof value === "number") {
    return Number.isFinite(value) && value >= 0 ? Either.right(Duration.millis(value)) : refuse("must be >= 0 milliseconds")
  }
  if (typeof value === "string") {
    const parsed = parseDuration(name, value)
    if (Either.isRight(parsed)) return Either.right(Duration.millis(parsed.right))
    // Effect's own forms ("200 millis", "5 seconds") are accepted too.
    const decoded = Duration.decodeUnknown(value)
    if (decoded._tag === "Some") return Either.right(decoded.value)
    return refuse(`is not a duration (${parsed.left.reason})`)
  }
  return refuse(`must be a duration like "30s" or milliseconds`)
}

const backoffOption = (file: string, value: unknown): Either.Either<Backoff.Backoff, UsageError> => {
  if (typeof value === "function") return Either.right(value as Backoff.Policy)
  if (Schedule.isSchedule(value)) return Either.right(value as Schedule.Schedule<unknown, unknown, never>)
  if (typeof value === "object" && value !== null && !Duration.isDuration(value)) {
    const o = value as Record<string, unknown>
    return Either.gen(function*() {
      const base = o.base === undefined ? undefined : yield* durationOption(file, "backoff.base", o.base)
      const max = o.max === undefined ? undefined : yield* durationOption(file, "backoff.max", o.max)
      const factor = o.factor === undefined ? undefined : Number(o.factor)
      const jitter = o.jitter === undefined ? undefined : Number(o.jitter)
      if (factor !== undefined && !(factor >= 1)) {
        return yield* Either.left(usage(`task file ${file}: options.backoff.factor must be a number >= 1`))
      }
      return Backoff.exponential({ base, max, factor, jitter })
    })
  }
  return Either.map(durationOption(file, "backoff", value), (d) => Backoff.constant(d))
}

const positiveInt = (file: string, name: string, value: unknown): Either.Either<number, UsageError> =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 1
    ? Either.right(value)
    : Either.left(usage(`task file ${file}: options.${name} must be an integer >= 1`))

// The same check as a handler's (internal/validate.ts), as the command's usage error.
const snoozeCap = (file: string, value: unknown): Either.Either<number, UsageError> =>
  Either.mapLeft(V.checkMaxSnoozes(value), (error) => usage(`task file ${file}: options.maxSnoozes ${error.reason}`))

const booleanOption = (file: string, name: string, value: unknown): Either.Either<boolean, UsageError> =>
  typeof value === "boolean" ? Either.right(value) : Either.left(usage(`task file ${file}: options.${name} must be true or false`))

/** The handler options a plain-function task file may export as `options`. */
const plainOptions = (file: string, value: unknown) =>
  Either.gen(function*() {
    if (value === undefined || value === null) return {}
    if (typeof value !== "object") return yield* Either.left(usage(`task file ${file}: options must be an object`))
    const o = value as Record<string, unknown>
    const known = new Set(["maxAttempts", "backoff", "timeout", "concurrency", "maxSnoozes", "global", "perGroup", "transactional"])
    const unknown = Object.keys(o).filter((k) => !known.has(k))
    if (unknown.length > 0) {
      return yield* Either.left(usage(`task file ${file}: unknown option ${unknown[0]} (known: ${[...known].join(", ")})`))
    }
    return {
      maxAttempts: o.maxAttempts === undefined ? undefined : yield* positiveInt(file, "maxAttempts", o.maxAttempts),
      concurrency: o.concurrency === undefined ? undefined : yield* positiveInt(file, "concurrency", o.concurrency),
      backoff: o.backoff === undefined ? undefined : yield* backoffOption(file, o.backoff),
      timeout: o.timeout === undefined ? undefined : yield* durationOption(file, "timeout", o.timeout),
      global: o.global === undefined ? undefined : yield* globalOption(file, o.global),
      maxSnoozes: o.maxSnoozes === undefined ? undefined : yield* snoozeCap(file, o.maxSnoozes),
      perGroup: o.perGroup === undefined ? undefined : yield* perGroupOption(file, o.perGroup),
      transactional: o.transactional === undefined ? undefined : yield* booleanOption(file, "transactional", o.transactional)
    }
  })

// `global: { concurrency, rate }`, the rate as "100/1m" or { limit, period }:
// checked here, so a bad one names the file before the worker starts.
const globalOption = (file: string, value: unknown) =>
  Either.gen(function*() {
    if (typeof value !== "object" || value === null) {
      return yield* Either.left(usage(`task file ${file}: options.global must be { concurrency?, rate? }`))
    }
    const g = value as Record<string, unknown>
    const rate = typeof g.rate === "string" ? yield* Either.mapLeft(parseRate("rate", g.rate), (e) =>
      usage(`task file ${file}: options.global.${e.message}`)) : g.rate
    const limits = { concurrency: g.concurrency, rate } as GlobalLimits
    yield* Either.mapLeft(checkLimits(limits), (e) => usage(`task file ${file}: options.global: ${e.message}`))
    return limits
  })

// `perGroup: { concurrency, ordered? }`: the handler's check (store/kinds.ts), as a usage error naming the file.
const perGroupOption = (file: string, value: unknown) =>
  Either.map(
    Either.mapLeft(checkPerGroup(value as PerGroup), (e) => usage(`task file ${file}: options.perGroup: ${e.reason}`)),
    (checked) => checked ?? undefined
  )

/** Whether the nearest package.json above a file says `"type": "module"` (so .ts and .js are ES modules). */
const inModulePackage = (file: string): boolean => {
  let dir = dirname(file)
  for (;;) {
    const candidate = join(dir, "package.json")
    if (existsSync(candidate)) {
      try {
        return JSON.parse(readFileSync(candidate, "utf8")).type === "module"
      } catch {
        return false
      }
    }
    const parent = dirname(dir)
    if (parent === dir) return false
    dir = parent
  }
}

// In a git checkout bin/docket.mjs runs the sources under tsx already; the
// compiled command (dist/, an installed package) registers tsx only when it
// meets a TypeScript task file, so a folder of .js/.mjs tasks never loads it.
const TSX_FLAG = "__docketTsxRegistered"
const ensureTypeScript = async (path: string) => {
  if (!/\.[cm]?ts$/.test(path)) return
  const global = globalThis as Record<string, unknown>
  if (global[TSX_FLAG] === true) return
  const tsx = await import("tsx/esm/api")
  tsx.register()
  global[TSX_FLAG] = true
}

// A .cts file, or a .ts/.js file outside a "type": "module" package, is
// CommonJS to Node: tsx's require hooks compile its TypeScript and its
// import/export (without them a .ts file fails with "Cannot require() ES
// Module ... in a cycle" and a .js one with "Unexpected token 'export'").
const TSX_CJS_FLAG = "__docketTsxCjsRegistered"
const ensureCommonJs = async (path: string) => {
  if (!/\.cts$/.test(path) && !(/\.(ts|js)$/.test(path) && !inModulePackage(path))) return
  const global = globalThis as Record<string, unknown>
  if (global[TSX_CJS_FLAG] === true) return
  const tsx = await import("tsx/cjs/api")
  tsx.register()
  global[TSX_CJS_FLAG] = true
}

/** A loaded task file: its handler and, if it exports one, its schedule. */
export interface Task {
  readonly handler: TaskHandler
  readonly recurring: Recurring.Recurring | undefined
}

const RECURRING_KEYS = new Set(["cron", "payload", "tz", "missed"])

/** A task file's `recurring` export as a schedule named by its kind, checked (`Recurring.check`). */
export const recurringOption = (
  file: string,
  kind: string,
  value: unknown
): Either.Either<Recurring.Recurring | undefined, UsageError> => {
  if (value === undefined) return Either.right(undefined)
  const refuse = (why: string) => Either.left(usage(`task file ${file}: recurring (schedule ${kind}) ${why}`))
  let schedule: Recurring.Recurring
  if (typeof value === "string") {
    schedule = Recurring.make(kind, { cron: value, kind })
  } else if (typeof value === "object" && value !== null) {
    const o = value as Record<string, unknown>
    const unknown = Object.keys(o).filter((k) => !RECURRING_KEYS.has(k))
    if (unknown.length > 0) return refuse(`has an unknown field ${unknown[0]} (known: cron, payload, tz, missed)`)
    // Recurring.check below refuses fields of the wrong type, naming them.
    schedule = Recurring.make(kind, {
      kind,
      cron: o.cron as string,
      payload: o.payload,
      tz: o.tz as string | undefined,
      missed: o.missed as Recurring.Missed | undefined
    })
  } else {
    return refuse(`must be a cron expression or { cron, payload, tz, missed }`)
  }
  return Either.match(Recurring.check(schedule), {
    onLeft: (error) => refuse(error.reason),
    onRight: () => Either.right(schedule)
  })
}

/** Imports one task file and makes its handler (and its schedule, if it exports `recurring`). */
export const loadTask = (task: TaskFile): Effect.Effect<Task, UsageError> =>
  Effect.flatMap(importTask(task), ({ handler, module, name }) =>
    Effect.map(
      recurringOption(name, task.kind, module.recurring ?? defaultOf(module)?.recurring),
      (recurring): Task => ({ handler, recurring })
    ))

// A CommonJS file's exports, seen from ESM as `default`.
const defaultOf = (module: Record<string, unknown>): { recurring?: unknown } | undefined =>
  typeof module.default === "object" && module.default !== null ? module.default as { recurring?: unknown } : undefined

// Imports one task file and makes its handler.
interface Imported {
  readonly handler: TaskHandler
  readonly module: Record<string, unknown>
  /** The file's name, for messages. */
  readonly name: string
}

const importTask = (task: TaskFile): Effect.Effect<Imported, UsageError> =>
  Effect.gen(function*() {
    const name = task.path.split(/[\\/]/).pop()!
    const module = yield* Effect.tryPromise({
      try: async () => {
        await ensureTypeScript(task.path)
        await ensureCommonJs(task.path)
        return await import(pathToFileURL(task.path).href) as Record<string, unknown>
      },
      catch: (error) => usage(`task file ${name} cannot be loaded: ${describeLoadError(task.path, error)}`)
    })
    // A CommonJS file imported from ESM shows module.exports as `default`
    // (and an ES module compiled to CommonJS, its exports as `default`'s).
    let exported = module.default
    let options = module.options
    if (typeof exported === "object" && exported !== null && !isHandler(exported) && "default" in exported) {
      options ??= (exported as { options?: unknown }).options
      exported = (exported as { default: unknown }).default
    }
    if (typeof exported === "function" && options === undefined) options = (exported as { options?: unknown }).options
    if (isHandler(exported)) {
      if (exported.kind !== task.kind) {
        return yield* usage(
          `task file ${name} exports the handler of kind ${exported.kind}; the file name says ${task.kind} (rename one)`
        )
      }
      return { handler: exported as TaskHandler, module, name }
    }
    if (typeof exported === "function") {
      const checked = yield* plainOptions(name, options)
      const handler = Handler.fromPromise(task.kind, exported as (payload: unknown, job: Handler.Job) => Promise<unknown>, checked)
      return { handler, module, name }
    }
    return yield* usage(
      `task file ${name} must default-export a Docket handler or an async (payload, job) => {} function`
    )
  })

/** Every task of a folder: the handlers, and the schedules some export. */
export const loadTasks = (
  dir: string
): Effect.Effect<{ readonly handlers: ReadonlyArray<TaskHandler>; readonly recurring: ReadonlyArray<Recurring.Recurring> }, UsageError> =>
  Effect.map(Effect.flatMap(listTaskFiles(dir), (files) => Effect.forEach(files, loadTask)), (tasks) => ({
    handlers: tasks.map((t) => t.handler),
    recurring: tasks.flatMap((t) => (t.recurring === undefined ? [] : [t.recurring]))
  }))
