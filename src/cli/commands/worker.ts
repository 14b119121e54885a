/**
 * `docket worker`: a worker pool over a folder of task files until
 * SIGINT/SIGTERM, shown by a status line (or log lines), stopped gracefully.
 */
import { Command, Options } from "@effect/cli"
import { Effect } from "effect"
import * as Docket from "../../Docket.js"
import * as V from "../../internal/validate.js"
import type * as Worker from "../../Worker.js"
import { usage } from "../errors.js"
import { plural } from "../format.js"
import * as Graceful from "../graceful.js"
import { databaseOption, databaseUrl, optionalDuration, optionalText } from "../options.js"
import { describeDatabase } from "../queue.js"
import { printLine, show } from "../status.js"
import { loadTasks } from "../tasks.js"

// The command's own floor for --lease (the library takes any lease from 1 ms); the ceiling is the library's.
const MIN_LEASE_MS = 1000
const DAY_MS = 24 * 3600 * 1000

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
  lease: optionalText("lease", "Lease length, renewed while a handler runs (default 30s)."),
  poll: optionalText("poll", "Fallback poll when no wake-up arrives (default 2s)."),
  grace: optionalText(
    "grace",
    "On SIGINT/SIGTERM, how long running items may finish before they are given back (default 10s); the outcomes not yet written then get up to 10s more."
  ),
  handledOnly: Options.boolean("handled-only").pipe(
    Options.withDescription(
      "Claim only kinds with a task file here (by default an item of a kind with no task file is dead at once)."
    )
  )
}

/** The worker's checked options; durations in milliseconds. */
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
    if (lease !== undefined && (lease < MIN_LEASE_MS || lease > V.MAX_LEASE_MS)) {
      return yield* usage(`--lease must be from ${MIN_LEASE_MS / 1000}s to ${V.MAX_LEASE_MS / DAY_MS} days`)
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
        `docket worker ${worker.id} started on ${describeDatabase(options.url)}: ` +
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

/** The `worker` command. */
export const worker = Command.make("worker", workerConfig, (args) => Effect.flatMap(workerOptions(args), runWorker)).pipe(
  Command.withDescription(
    "Migrates the database, then runs every task file of --tasks until SIGINT or SIGTERM (graceful: " +
      "running items get --grace to finish, then are given back)."
  )
)
