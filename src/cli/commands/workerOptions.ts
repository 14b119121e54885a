/**
 * `docket worker`'s options as read from its command line, and their checks
 * across options (exit 2 on a bad one), giving the options it runs with.
 * Shared by the command's @effect/cli definition (worker.ts) and the command
 * line read by hand (hotArgv.ts, hotWorker.ts): this module loads no
 * @effect/cli.
 */
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Database from "../../Database.js"
import type { Retention } from "../../Domain.js"
import * as V from "../../internal/validate.js"
import { usage } from "../errors.js"
import type { LogFormat } from "../logFormat.js"
import { type DatabaseArgs, databaseUrl, horizonThreshold, listenDatabaseUrl, schemaName } from "../values.js"
import type { RunOptions } from "./workerRun.js"

const MIN_LEASE_MS = 1000
const DAY_MS = 24 * 3600 * 1000

/** The command line's values (durations in milliseconds), as @effect/cli gives them for worker.ts's options. */
export interface WorkerArgs {
  readonly tasks: string
  readonly database: DatabaseArgs
  readonly listenDatabase: Option.Option<string>
  readonly concurrency: number
  readonly lease: number
  readonly poll: number
  readonly grace: number
  readonly retention: Retention
  readonly logItems: boolean
  readonly logFormat: LogFormat
  /** null: no summary lines (`--summary off`). */
  readonly summary: number | null
  readonly allKinds: boolean
  readonly horizonAge: number
  readonly horizonTransactions: number
}

/** The defaults of the options with one (worker.ts shows them in the help). */
export const WORKER_DEFAULTS: {
  readonly concurrency: number
  readonly lease: number
  readonly poll: number
  readonly grace: number
  readonly summary: number
} = { concurrency: 10, lease: 30_000, poll: 2_000, grace: 10_000, summary: 60_000 }

/** Checks the worker's options (exit 2 on a bad one). */
export const workerOptions = (args: WorkerArgs) =>
  Effect.gen(function*() {
    if (args.lease < MIN_LEASE_MS || args.lease > V.MAX_LEASE_MS) {
      return yield* usage(`--lease must be from ${MIN_LEASE_MS / 1000}s to ${V.MAX_LEASE_MS / DAY_MS} days`)
    }
    if (args.poll < 1) return yield* usage("--poll must be at least 1ms")
    const url = databaseUrl(args.database)
    const listenDatabase = listenDatabaseUrl(args.listenDatabase)
    if (listenDatabase !== undefined) {
      if (Database.parse(listenDatabase)._tag !== "Pg") {
        return yield* usage("--listen-database (or DOCKET_LISTEN_DATABASE_URL) must be a postgres:// or postgresql:// URL")
      }
      if (Database.parse(url)._tag !== "Pg") {
        return yield* usage("--listen-database (or DOCKET_LISTEN_DATABASE_URL) is for PostgreSQL: the database is a SQLite file")
      }
    }
    return {
      url,
      listenDatabase,
      schema: schemaName(args.database),
      tasks: args.tasks,
      concurrency: args.concurrency,
      lease: args.lease,
      poll: args.poll,
      grace: args.grace,
      allKinds: args.allKinds,
      retention: args.retention,
      log: { format: args.logFormat, items: args.logItems, summaryMs: args.summary },
      horizon: horizonThreshold(args)
    } satisfies RunOptions
  })
