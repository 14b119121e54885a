/**
 * `docket worker`: a worker pool over a folder of task files until
 * SIGINT/SIGTERM, shown by a status line (or log lines: failures, a periodic
 * summary, per-item lines with --log-items; text or JSON), stopped gracefully.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { parseDuration } from "../input.js"
import {
  databaseOption,
  durationOption,
  horizonOptions,
  integerOption,
  optionalText,
  refuse,
  textOption,
  withDefault
} from "../options.js"
import { LOG_FORMATS, type LogFormat } from "../logFormat.js"
import { parseRetention } from "../retention.js"
import type { Retention } from "../../Domain.js"
import { WORKER_DEFAULTS, type WorkerArgs, workerOptions } from "./workerOptions.js"

// The command's own floor for --lease (the library takes any lease from 1 ms); the ceiling is the library's.
const workerConfig = {
  tasks: textOption(
    "tasks",
    "folder",
    "The folder of task files: <kind>.ts, .mts, .cts, .js, .mjs or .cjs, each default-exporting a Docket " +
      "handler or an async (payload, job) => {} function (a throw is a retry); one may also export " +
      "recurring, a cron expression: its items are enqueued at each tick."
  ),
  database: databaseOption,
  listenDatabase: optionalText(
    "listen-database",
    "url",
    "PostgreSQL: a URL for the LISTEN connection only, for a --database that goes through a " +
      "transaction-pooling PgBouncer (where LISTEN hears nothing): a direct or session-pooled URL of the " +
      "same database. Default: $DOCKET_LISTEN_DATABASE_URL; without either, a worker behind such a pooler " +
      "warns once and polls."
  ),
  concurrency: integerOption("concurrency", "Handlers running at once in this process.", { min: 1 }).pipe(
    withDefault(WORKER_DEFAULTS.concurrency)
  ),
  lease: durationOption("lease", "How long a claim holds an item; renewed while its handler runs.").pipe(
    withDefault(WORKER_DEFAULTS.lease, "30s")
  ),
  poll: durationOption("poll", "How often to look for due items when no wake-up arrives.").pipe(
    withDefault(WORKER_DEFAULTS.poll, "2s")
  ),
  grace: durationOption(
    "grace",
    "On SIGINT/SIGTERM, how long running items may finish before they are given back; the stop's " +
      "database writes (outcomes not yet written, items given back) get up to 10s more in all."
  ).pipe(withDefault(WORKER_DEFAULTS.grace, "10s")),
  retention: Options.text("retention").pipe(
    Options.withPseudoName("<duration|state=duration,...>"),
    Options.withDescription(
      "How long finished items are kept before this worker prunes them: one duration for done and " +
        "cancelled items (dead ones stay until a person deletes them), or done=1h,cancelled=7d,dead=30d; " +
        "forever keeps a state, 0 deletes (done items at once). Give every worker the same."
    ),
    Options.mapEffect((text) =>
      Either.match(parseRetention(text), { onLeft: (e) => Effect.fail(refuse(e.reason)), onRight: Effect.succeed })
    ),
    Options.withDefault<Retention>({}),
    Options.withDescription("Default: done=24h,cancelled=24h,dead=forever.")
  ),
  logItems: Options.boolean("log-items").pipe(
    Options.withDescription(
      "Also log a line per routine item event (started, done, snoozed, absorbed, given back) when the " +
        "output is not a terminal. Without it the worker logs failures and abnormal events (retry, dead, " +
        "cancelled, lease lost, storage errors) and a summary every --summary: a line per item costs throughput."
    )
  ),
  logFormat: Options.text("log-format").pipe(
    Options.withPseudoName("<text|json>"),
    Options.mapEffect((text) =>
      (LOG_FORMATS as ReadonlyArray<string>).includes(text.trim())
        ? Effect.succeed(text.trim() as LogFormat)
        : Effect.fail(refuse(`--log-format must be text or json (got '${text}')`))
    ),
    Options.withDescription(
      "The form of the log lines: text, or json (one object per line: time, level, event, kind, id, " +
        "attempt, durationMs, error...; the started and stopped lines and warnings too). json also " +
        "replaces the terminal's status line by log lines."
    ),
    Options.withDefault<LogFormat>("text"),
    Options.withDescription("Default: text.")
  ),
  summary: Options.text("summary").pipe(
    Options.withPseudoName("<duration|off>"),
    Options.withDescription(
      "How often to log a summary line (done, retried, dead, running and done per second since the " +
        "last one) when the output is not a terminal; none while nothing happens. off: never."
    ),
    Options.mapEffect((text) =>
      text.trim() === "off"
        ? Effect.succeed(null)
        : Either.match(parseDuration("--summary", text), {
          onLeft: (e) => Effect.fail(refuse(typeof e === "string" ? e : e.reason)),
          onRight: (n) => n < 100 ? Effect.fail(refuse("--summary must be at least 100ms, or off")) : Effect.succeed(n)
        })
    ),
    Options.withDefault<number | null>(WORKER_DEFAULTS.summary),
    Options.withDescription("Default: 60s.")
  ),
  allKinds: Options.boolean("all-kinds").pipe(
    Options.withDescription(
      "Claim items of every kind: an item of a kind with no task file here is dead at once. Without it " +
        "the worker claims only the kinds of its task files, and leaves the others waiting for the " +
        "workers that have them (several services can share one queue)."
    )
  ),
  // Once a minute, a warning naming who holds vacuum back past them (PostgreSQL).
  ...horizonOptions
}

/**
 * The `worker` command. Running the pool (workerRun.ts: the pool, its parts,
 * the task files' loader) is loaded once the options are read, so the other
 * commands and --help do not load it.
 */
export const worker = Command.make("worker", workerConfig, (args) =>
  Effect.flatMap(
    workerOptions(args satisfies WorkerArgs),
    (options) => Effect.flatMap(Effect.promise(() => import("./workerRun.js")), (m) => m.runWorker(options))
  )).pipe(
  Command.withDescription(
    "Migrates the database, then runs the task files of --tasks until SIGINT or SIGTERM (graceful: " +
      "running items get --grace to finish, then are given back). It claims only the kinds it has " +
      "task files for, unless --all-kinds."
  )
)
