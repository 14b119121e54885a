/**
 * Opening the queue for one command: the database migrated, the repository
 * provided for the command's effect and closed after it.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { existsSync } from "node:fs"
import { dirname, resolve } from "node:path"
import * as Layer from "effect/Layer"
import * as Database from "../Database.js"
import type * as QueueRepo from "../QueueRepo.js"
import { usage } from "./errors.js"
import { type DatabaseArgs, databaseOptions, databaseUrl } from "./values.js"

/**
 * Runs `f` on the queue the arguments name (made and migrated if need be).
 *
 * The repository's modules (the store, its SQL, about 80 of Docket's own) are
 * loaded here, when a command opens the queue, not when the command line is
 * parsed: `--help` and a usage error never load them. It is
 * `Docket.layerClient` without Docket.ts, whose import of the pool (Worker.ts
 * and its parts) no command but `worker` and `demo` needs.
 */
export const withRepo = <A, E>(
  database: DatabaseArgs,
  f: (repo: QueueRepo.Service) => Effect.Effect<A, E, SqlClient.SqlClient>
) =>
  Effect.flatMap(Effect.promise(() => import("../QueueRepo.js")), (QueueRepo) =>
    Effect.flatMap(QueueRepo.QueueRepo, f).pipe(
      Effect.provide(
        QueueRepo.layer().pipe(
          Layer.provideMerge(Database.layer(databaseUrl(database), databaseOptions(database)))
        )
      )
    ))

/**
 * For the commands that only look at a queue (stats, dead): a SQLite file
 * that does not exist is refused rather than made (a mistyped path would
 * otherwise show an empty queue).
 */
export const withExistingRepo = <A, E>(
  database: DatabaseArgs,
  f: (repo: QueueRepo.Service) => Effect.Effect<A, E, SqlClient.SqlClient>
) => refuseMissing(databaseUrl(database)).pipe(Effect.zipRight(withRepo(database, f)))

/** Fails with a usage error when `url` is a SQLite file that does not exist (in a folder that does). */
export const refuseMissing = (url: string) =>
  Effect.suspend(() => {
    const target = Database.parse(url)
    const missing = target._tag === "Sqlite" && target.filename !== ":memory:" && !existsSync(target.filename) &&
      existsSync(dirname(resolve(target.filename)))
    return missing
      ? Effect.fail(usage(`no queue at ${url} (docket migrate, enqueue or worker makes one)`))
      : Effect.void
  })

/** The database of a URL (and the schema, when one is given) as the command names it in its output. */
export const describeDatabase = (url: string, schema?: string): string =>
  Database.describe(Database.parse(url)) + (schema === undefined ? "" : ` (schema ${schema})`)
