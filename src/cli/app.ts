/**
 * The `docket` command: its subcommands and options (the `--help` text is
 * generated from these definitions by @effect/cli).
 *
 * Database: `--database <url>`, else `DOCKET_DATABASE_URL`, else
 * `./docket.db`. `postgres://` / `postgresql://` is PostgreSQL, anything else a
 * SQLite file path. Exit codes: 0 ok, 1 failure, 2 bad usage or bad input (one
 * line on stderr saying what is wrong; nothing written).
 */
import { Args, Command, Options } from "@effect/cli"
import { SqlClient } from "@effect/sql"
import { Chunk, Console, Effect, Either, Option, Stream } from "effect"
import { createReadStream, createWriteStream, existsSync, mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { createInterface } from "node:readline"
import { pipeline } from "node:stream/promises"
import * as Database from "../Database.js"
import * as Docket from "../Docket.js"
import type { InvalidInput, StorageError } from "../Errors.js"
import * as Migrations from "../Migrations.js"
import * as QueueRepo from "../QueueRepo.js"
import * as Worker from "../Worker.js"
import { demoCommand } from "./demo.js"
import * as Graceful from "./graceful.js"
import { CommandFailed, usage, type UsageError } from "./errors.js"
import { checkRequest, looksLikeOption, parseBulkLine, parseDuration, parsePayload, parseTime } from "./input.js"
import { printLine, show } from "./status.js"
import { loadTasks } from "./tasks.js"

// --- shared options ---

export const databaseOption = Options.text("database").pipe(
  Options.withAlias("d"),
  Options.withDescription(
    "The queue's database: a postgres:// or postgresql:// URL, or a SQLite file path " +
      "(default: $DOCKET_DATABASE_URL, else ./docket.db)."
  ),
  Options.optional
)

/** The database URL: the option, else DOCKET_DATABASE_URL, else ./docket.db. */
export const databaseUrl = (option: Option.Option<string>): string =>
  Option.getOrElse(option, () => {
    const env = process.env.DOCKET_DATABASE_URL
    return env !== undefined && env.trim() !== "" ? env.trim() : Database.DEFAULT_URL
  })

const jsonOption = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of text."))

const fromEither = <A>(either: Either.Either<A, UsageError>): Effect.Effect<A, UsageError> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

const optionalDuration = (name: string, option: Option.Option<string>) =>
  Option.match(option, {
    onNone: () => Effect.succeed(undefined),
    onSome: (text) => fromEither(parseDuration(name, text))
  })

/** The queue (database migrated) for one command. */
const client = (url: string) => Docket.layerClient(url)

const withRepo = <A, E>(
  url: string,
  f: (repo: QueueRepo.Service) => Effect.Effect<A, E, SqlClient.SqlClient>
) => Effect.flatMap(QueueRepo.QueueRepo, f).pipe(Effect.provide(client(url)))

/**
 * For the commands that only look at a queue (stats, dead): a SQLite file
 * that does not exist is refused rather than made (a mistyped path would
 * otherwise show an empty queue).
 */
const withExistingRepo = <A, E>(
  url: string,
  f: (repo: QueueRepo.Service) => Effect.Effect<A, E, SqlClient.SqlClient>
) =>
  Effect.suspend(() => {
    const target = Database.parse(url)
    const missing = target._tag === "Sqlite" && target.filename !== ":memory:" && !existsSync(target.filename) &&
      existsSync(dirname(resolve(target.filename)))
    return missing
      ? Effect.fail(usage(`no queue at ${url} (docket migrate, enqueue or worker makes one)`))
      : Effect.void
  }).pipe(Effect.zipRight(withRepo(url, f)))

// --- migrate ---

const migrate = Command.make("migrate", { database: databaseOption }, ({ database }) =>
  Effect.gen(function*() {
    const url = databaseUrl(database)
    const applied = yield* Migrations.run.pipe(Effect.provide(Database.layer(url, { migrate: false })))
    const where = Database.describe(Database.parse(url))
    yield* Console.log(
      applied.length === 0
        ? `${where}: the schema is up to date`
        : `${where}: applied migration${applied.length === 1 ? "" : "s"} ${applied.join(", ")}`
    )
  })).pipe(Command.withDescription("Creates or updates Docket's tables in the database (safe to run at any time)."))

// --- enqueue ---

const enqueueConfig = {
  database: databaseOption,
  kind: Args.text({ name: "kind" }).pipe(Args.withDescription("The item's kind (its handler's name)."), Args.optional),
  payload: Args.text({ name: "json-payload" }).pipe(
    Args.withDescription("The payload as JSON (default null)."),
    Args.optional
  ),
  key: Options.text("key").pipe(
    Options.withDescription("Dedupe key: while an item of this kind and key waits, another is not added."),
    Options.optional
  ),
  delay: Options.text("delay").pipe(
    Options.withDescription("Due after this long: 500ms, 30s, 5m, 1h or milliseconds."),
    Options.optional
  ),
  runAt: Options.text("run-at").pipe(
    Options.withDescription("Due at this ISO 8601 time (2030-01-01T09:00:00Z)."),
    Options.optional
  ),
  priority: Options.integer("priority").pipe(
    Options.withDescription("Higher runs first among due items (default 0)."),
    Options.optional
  ),
  maxAttempts: Options.integer("max-attempts").pipe(
    Options.withDescription("Attempts before the item is dead (default 8)."),
    Options.optional
  ),
  from: Options.text("from").pipe(
    Options.withDescription(
      "Bulk: an NDJSON file (or - for stdin), one object a line: " +
        `{"kind":..,"payload":..,"key"?,"delay"?,"runAt"?,"priority"?,"maxAttempts"?}. ` +
        "A bad line refuses the whole file."
    ),
    Options.optional
  )
}

type EnqueueArgs = Command.Command.ParseConfig<typeof enqueueConfig>

const enqueueOne = (args: EnqueueArgs, kind: string) =>
  Effect.gen(function*() {
    const payload = yield* Option.match(args.payload, {
      onNone: () => Effect.succeed(null as unknown),
      onSome: (text) => fromEither(parsePayload(text))
    })
    const delay = yield* optionalDuration("--delay", args.delay)
    const runAt = yield* Option.match(args.runAt, {
      onNone: () => Effect.succeed(undefined),
      onSome: (text) => fromEither(parseTime("--run-at", text))
    })
    const request = yield* fromEither(checkRequest({
      kind,
      payload,
      key: Option.getOrUndefined(args.key),
      delay,
      runAt,
      priority: Option.getOrUndefined(args.priority),
      maxAttempts: Option.getOrUndefined(args.maxAttempts)
    }))
    const result = yield* withRepo(databaseUrl(args.database), (repo) => repo.enqueue(kind, request.payload, request))
    yield* Console.log(
      result._tag === "Enqueued"
        ? String(result.id)
        : `deduplicated: item ${result.id} of kind ${kind} with key ${request.key} is already waiting`
    )
  })

const BATCH = 1000

/** Streams the lines of a bulk file as checked requests, in batches. */
const bulkBatches = (path: string) =>
  Stream.fromAsyncIterable(
    createInterface({ input: createReadStream(path, { encoding: "utf8" }), crlfDelay: Infinity }),
    (error) => usage(`--from: cannot read ${path}: ${(error as Error).message}`)
  ).pipe(
    Stream.zipWithIndex,
    Stream.filter(([line]) => line.trim() !== ""),
    Stream.mapEffect(([line, index]) => fromEither(parseBulkLine(line, index + 1))),
    Stream.grouped(BATCH)
  )

const enqueueBulk = (args: EnqueueArgs, from: string) =>
  Effect.gen(function*() {
    if (Option.isSome(args.kind) || Option.isSome(args.payload)) {
      const extra = Option.getOrElse(args.kind, () => "")
      return yield* usage(
        looksLikeOption(extra) ? `unknown option ${extra.split("=")[0]}` : "--from takes no kind or payload argument"
      )
    }
    const perItem = ([args.key, args.delay, args.runAt, args.priority, args.maxAttempts] as ReadonlyArray<Option.Option<unknown>>)
      .some(Option.isSome)
    if (perItem) {
      return yield* usage("--from takes no --key, --delay, --run-at, --priority or --max-attempts (give them per line)")
    }
    // stdin is spooled to a temporary file, so it can be checked in full before anything is written.
    const path = from === "-" ? yield* spoolStdin : from
    if (!existsSync(path)) return yield* usage(`--from: file ${from} does not exist`)
    if (!statSync(path).isFile()) return yield* usage(`--from: ${from} is not a file`)
    // First pass: every line checked, nothing opened.
    const count = yield* Stream.runFold(bulkBatches(path), 0, (n, batch) => n + batch.length)
    if (count === 0) return yield* Console.log(`no items in ${from === "-" ? "stdin" : from}`)
    // Second pass: the batches go through the bulk path in one transaction (all or nothing).
    const totals = yield* withRepo(databaseUrl(args.database), (repo) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(insertAll(repo, path))))
    yield* Console.log(
      `enqueued ${totals.enqueued} item${totals.enqueued === 1 ? "" : "s"}` +
        (totals.deduplicated > 0 ? ` (${totals.deduplicated} deduplicated)` : "")
    )
  }).pipe(Effect.scoped)

const insertAll = (repo: QueueRepo.Service, path: string) =>
  Effect.gen(function*() {
    const totals = { enqueued: 0, deduplicated: 0 }
    yield* Stream.runForEach(bulkBatches(path), (batch) =>
      Effect.map(repo.enqueueMany([...batch]), (results) => {
        for (const r of results) {
          if (r._tag === "Enqueued") totals.enqueued++
          else totals.deduplicated++
        }
      }))
    return totals
  })

const spoolStdin = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-stdin-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(
  Effect.flatMap((dir) =>
    Effect.tryPromise({
      try: async () => {
        const path = join(dir, "items.ndjson")
        await pipeline(process.stdin, createWriteStream(path))
        return path
      },
      catch: (error) => usage(`--from -: cannot read stdin: ${(error as Error).message}`)
    })
  )
)

const enqueue = Command.make("enqueue", enqueueConfig, (args) =>
  Option.match(args.from, {
    onSome: (from) => enqueueBulk(args, from),
    onNone: () =>
      Option.match(args.kind, {
        onNone: () => Effect.fail(usage("give the kind of the item (or --from <file>)")),
        onSome: (kind) =>
          looksLikeOption(kind) ? Effect.fail(usage(`unknown option ${kind.split("=")[0]}`)) : enqueueOne(args, kind)
      })
  })).pipe(
    Command.withDescription(
      "Adds an item: prints its id, or says an item with the same kind and key was already waiting. " +
        "With --from, adds the items of an NDJSON file in batches."
    )
  )

// --- stats ---

const pad = (text: string, width: number) => text + " ".repeat(Math.max(0, width - text.length))
const padLeft = (text: string, width: number) => " ".repeat(Math.max(0, width - text.length)) + text

/** The stats as a text table: one row per kind and a total. */
export const statsTable = (stats: QueueRepo.Stats): string => {
  const rows: Array<[string, QueueRepo.Counts]> = [...Object.entries(stats.byKind)].sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0
  )
  rows.push(["total", stats])
  const width = Math.max(4, ...rows.map(([k]) => k.length))
  const head = `${pad("kind", width)}  ${padLeft("due", 8)}  ${padLeft("scheduled", 9)}  ${padLeft("running", 8)}  ${
    padLeft("dead", 8)
  }`
  const lines = rows.map(([kind, c]) =>
    `${pad(kind, width)}  ${padLeft(String(c.due), 8)}  ${padLeft(String(c.scheduled), 9)}  ${
      padLeft(String(c.running), 8)
    }  ${padLeft(String(c.dead), 8)}`
  )
  return [head, ...lines].join("\n")
}

const stats = Command.make("stats", { database: databaseOption, json: jsonOption }, ({ database, json }) =>
  withExistingRepo(databaseUrl(database), (repo) => repo.stats).pipe(
    Effect.flatMap((s) =>
      Console.log(
        json
          ? JSON.stringify({ due: s.due, scheduled: s.scheduled, running: s.running, dead: s.dead, byKind: s.byKind })
          : statsTable(s)
      )
    )
  )).pipe(
    Command.withDescription(
      "Counts items: due (waiting, due now), scheduled (waiting, due later), running (leased) and dead, " +
        "in total and by kind."
    )
  )

// --- dead ---

const kindOption = (description: string) =>
  Options.text("kind").pipe(Options.withDescription(description), Options.optional)

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

/** Every dead item (of a kind), page by page. */
const deadItems = (repo: QueueRepo.Service, kind: string | undefined) =>
  Stream.paginateChunkEffect(0, (after) =>
    Effect.map(repo.listDead({ kind, after, limit: 500 }), (items) => [
      Chunk.fromIterable(items),
      items.length < 500 ? Option.none<number>() : Option.some(items[items.length - 1].id)
    ] as const))

const deadList = Command.make(
  "list",
  { database: databaseOption, kind: kindOption("Only dead items of this kind."), json: jsonOption },
  ({ database, json, kind }) =>
    withExistingRepo(databaseUrl(database), (repo) =>
      Effect.gen(function*() {
        const k = Option.getOrUndefined(kind)
        if (json) {
          let first = true
          yield* Effect.sync(() => process.stdout.write("["))
          yield* Stream.runForEach(deadItems(repo, k), (item) =>
            Effect.sync(() => {
              process.stdout.write((first ? "\n" : ",\n") + JSON.stringify(item))
              first = false
            }))
          yield* Effect.sync(() => process.stdout.write(first ? "]\n" : "\n]\n"))
          return
        }
        let n = 0
        yield* Stream.runForEach(deadItems(repo, k), (item) =>
          Effect.suspend(() => {
            const header = n++ === 0 ? Console.log("ID\tKIND\tATTEMPTS\tLAST ERROR\tPAYLOAD") : Effect.void
            const error = clip((item.lastError ?? "").replace(/\s*\r?\n\s*/g, " "), 120)
            return Effect.zipRight(
              header,
              Console.log(
                `${item.id}\t${item.kind}\t${item.attempts}/${item.maxAttempts}\t${error}\t${
                  clip(JSON.stringify(item.payload), 120)
                }`
              )
            )
          }))
        if (n === 0) yield* Console.log(k === undefined ? "no dead items" : `no dead items of kind ${k}`)
      }))
).pipe(Command.withDescription("Lists dead items: id, kind, attempts, last error and payload."))

const selectionConfig = (verb: string) => ({
  database: databaseOption,
  ids: Args.integer({ name: "id" }).pipe(Args.withDescription(`Ids of dead items to ${verb}.`), Args.repeated),
  all: Options.boolean("all").pipe(Options.withDescription(`${verb} every dead item (of --kind, if given).`)),
  kind: kindOption("With --all: only dead items of this kind.")
})

const selection = (
  ids: ReadonlyArray<number>,
  all: boolean,
  kind: Option.Option<string>
): Effect.Effect<QueueRepo.DeadSelection, UsageError> => {
  if (ids.length > 0 && all) return Effect.fail(usage("give ids or --all, not both"))
  if (Option.isSome(kind) && !all) return Effect.fail(usage("--kind goes with --all"))
  if (ids.length === 0 && !all) return Effect.fail(usage("give the ids of dead items, or --all"))
  const bad = ids.find((id) => !Number.isSafeInteger(id) || id < 1)
  if (bad !== undefined) return Effect.fail(usage(`${bad} is not an item id`))
  return Effect.succeed(all ? { all: true, kind: Option.getOrUndefined(kind) } : { ids })
}

const listIds = (ids: ReadonlyArray<number>) =>
  ids.length <= 20 ? ids.join(", ") : `${ids.slice(0, 20).join(", ")}, … (${ids.length - 20} more)`

const deadAction = (
  verb: "retry" | "delete",
  done: string,
  act: (repo: QueueRepo.Service, s: QueueRepo.DeadSelection) => Effect.Effect<ReadonlyArray<number>, InvalidInput | StorageError>
) =>
  Command.make(verb, selectionConfig(verb), ({ all, database, ids, kind }) =>
    Effect.gen(function*() {
      const s = yield* selection(ids, all, kind)
      const changed = yield* withExistingRepo(databaseUrl(database), (repo) => act(repo, s))
      yield* Console.log(
        changed.length === 0 ? "no dead items matched" : `${done} ${changed.length} dead item${changed.length === 1 ? "" : "s"}: ${listIds(changed)}`
      )
      if ("ids" in s) {
        const missing = [...new Set(s.ids)].filter((id) => !changed.includes(id))
        if (missing.length > 0) {
          return yield* new CommandFailed({ reason: `not dead (or no such item): ${listIds(missing)}` })
        }
      }
    }))

const deadRetry = deadAction("retry", "retried", (repo, s) => repo.retryDead(s)).pipe(
  Command.withDescription("Puts dead items back in the queue, due now, with a fresh attempt budget.")
)
const deadDelete = deadAction("delete", "deleted", (repo, s) => repo.deleteDead(s)).pipe(
  Command.withDescription("Deletes dead items for good.")
)

const dead = Command.make("dead").pipe(
  Command.withDescription("Dead items: list, retry or delete them."),
  Command.withSubcommands([deadList, deadRetry, deadDelete])
)

// --- worker ---

const workerConfig = {
  database: databaseOption,
  tasks: Options.text("tasks").pipe(
    Options.withDescription(
      "The folder of task files: <kind>.ts, .mts, .js or .mjs, each default-exporting a Docket handler " +
        "or an async (payload, job) => {} function (a throw is a retry)."
    )
  ),
  concurrency: Options.integer("concurrency").pipe(
    Options.withDescription("Handlers running at once in this process."),
    Options.withDefault(10)
  ),
  lease: Options.text("lease").pipe(
    Options.withDescription("Lease length, renewed while a handler runs (default 30s)."),
    Options.optional
  ),
  poll: Options.text("poll").pipe(
    Options.withDescription("Fallback poll when no wake-up arrives (default 2s)."),
    Options.optional
  ),
  grace: Options.text("grace").pipe(
    Options.withDescription(
      "On SIGINT/SIGTERM, how long running items may finish before they are given back (default 10s); the outcomes not yet written then get up to 10s more."
    ),
    Options.optional
  ),
  handledOnly: Options.boolean("handled-only").pipe(
    Options.withDescription(
      "Claim only kinds with a task file here (by default an item of a kind with no task file is dead at once)."
    )
  )
}

export interface RunOptions {
  readonly url: string
  readonly tasks: string
  readonly concurrency: number
  readonly lease?: number | undefined
  readonly poll?: number | undefined
  readonly grace?: number | undefined
  readonly handledOnly: boolean
}

/** Checks the worker's options (exit 2 on a bad one). */
export const workerOptions = (args: Command.Command.ParseConfig<typeof workerConfig>) =>
  Effect.gen(function*() {
    if (args.concurrency < 1) return yield* usage(`--concurrency must be at least 1 (got ${args.concurrency})`)
    const lease = yield* optionalDuration("--lease", args.lease)
    if (lease !== undefined && (lease < 1000 || lease > 7 * 24 * 3600 * 1000)) {
      return yield* usage("--lease must be from 1s to 7 days")
    }
    const poll = yield* optionalDuration("--poll", args.poll)
    if (poll !== undefined && poll < 1) return yield* usage("--poll must be at least 1ms")
    const grace = yield* optionalDuration("--grace", args.grace)
    return {
      url: databaseUrl(args.database),
      tasks: args.tasks,
      concurrency: args.concurrency,
      lease,
      poll,
      grace,
      handledOnly: args.handledOnly
    } satisfies RunOptions
  })

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** Runs a worker over a folder of task files until interrupted (SIGINT/SIGTERM). */
export const runWorker = (options: RunOptions) =>
  Effect.gen(function*() {
    const handlers = yield* loadTasks(options.tasks)
    const graceMs = options.grace ?? 10_000
    let service: Worker.Service | undefined
    yield* Effect.gen(function*() {
      const pool = yield* Graceful.start({
        handlers,
        concurrency: options.concurrency,
        lease: options.lease,
        poll: options.poll,
        grace: graceMs,
        claimKinds: options.handledOnly ? "handled" : "all"
      })
      const worker = pool.worker
      service = worker
      // Shown until after the pool stopped, so the items finishing in the grace show too.
      yield* show(worker, process.stdout.isTTY === true)
      yield* printLine(
        `docket worker ${worker.id} started on ${Database.describe(Database.parse(options.url))}: ` +
          `${plural(handlers.length, "kind")} (${handlers.map((h) => h.kind).join(", ")}), ` +
          `concurrency ${options.concurrency}`
      )
      return yield* Effect.never.pipe(
        Effect.onInterrupt(() =>
          worker.counters.pipe(
            Effect.flatMap((c) =>
              printLine(
                `docket worker stopping: ${plural(c.running, "running item")} may finish within ${graceMs} ms`
              )
            ),
            Effect.zipRight(pool.stop)
          )
        )
      )
    }).pipe(
      Effect.scoped,
      Effect.provide(Docket.layerClient(options.url)),
      Effect.onInterrupt(() =>
        service === undefined ? Effect.void : Effect.flatMap(service.counters, (c) =>
          printLine(
            `docket worker stopped: done ${c.completed}, retried ${c.retried}, dead ${c.dead}, ` +
              `given back ${c.released}`
          ))
      )
    )
  })

const worker = Command.make("worker", workerConfig, (args) => Effect.flatMap(workerOptions(args), runWorker)).pipe(
  Command.withDescription(
    "Migrates the database, then runs every task file of --tasks until SIGINT or SIGTERM (graceful: " +
      "running items get --grace to finish, then are given back)."
  )
)

// --- the command ---

export const root = Command.make("docket").pipe(
  Command.withDescription("Docket: a durable work queue and worker runtime (SQLite or PostgreSQL)."),
  Command.withSubcommands([migrate, enqueue, worker, stats, dead, demoCommand])
)
