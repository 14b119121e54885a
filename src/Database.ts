/**
 * Connecting Docket to its database: a `SqlClient` layer for PostgreSQL or a
 * SQLite file, chosen from a URL, with the schema migrated when the layer is
 * built (unless told not to).
 *
 * `postgres://` or `postgresql://` means PostgreSQL; anything else is a SQLite
 * file path (`sqlite:` / `file:` prefixes are accepted and removed).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { existsSync, statSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { DatabaseUnavailable, InvalidInput, type MigrationFailed } from "./Errors.js"
import * as DirectPool from "./internal/directPool.js"
import { pgLayer } from "./internal/pgLayer.js"
import * as PgSchema from "./internal/pgSchema.js"
import * as Tls from "./internal/tls.js"
import * as Migrations from "./Migrations.js"

/** Where the queue lives. */
export type Target =
  | { readonly _tag: "Pg"; readonly url: string }
  | { readonly _tag: "Sqlite"; readonly filename: string }

/** The database named cannot be opened or reached (defined in Errors.ts). */
export { DatabaseUnavailable } from "./Errors.js"

/** The default: a SQLite file in the working directory. */
export const DEFAULT_URL = "./docket.db"

/** Reads a database URL. */
export const parse = (url: string): Target => {
  if (/^postgres(ql)?:\/\//i.test(url)) return { _tag: "Pg", url }
  const filename = url.replace(/^sqlite:(\/\/)?/i, "").replace(/^file:(\/\/)?/i, "")
  return { _tag: "Sqlite", filename }
}

/** A URL for logs: the password (and a client key's, `sslpassword`) hidden. */
export const describe = (target: Target): string =>
  target._tag === "Pg"
    ? target.url.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@").replace(/([?&]sslpassword=)[^&#]*/gi, "$1***")
    : target.filename

/** libpq's `sslmode` values (docs/operations.md, "TLS"). */
export type SslMode = Tls.SslMode
/** TLS settings given in code, each the URL parameter of the same meaning (docs/operations.md, "TLS"). */
export type TlsOptions = Tls.TlsOptions

export { DEFAULT_STATEMENT_TIMEOUT_MS, KEEPALIVE_IDLE_MS } from "./internal/pgLayer.js"

/** How `layer` connects: migrating, pool size, SQLite durability, PostgreSQL application name. */
export interface Options {
  /** Migrate the schema when the layer is built (default true). */
  readonly migrate?: boolean | undefined
  /** PostgreSQL pool size (default 10). */
  readonly maxConnections?: number | undefined
  /** SQLite `synchronous` pragma: "full" (default, durable on power loss) or "normal" (faster). */
  readonly sqliteSynchronous?: "full" | "normal" | undefined
  /** PostgreSQL application_name, shown in pg_stat_activity (default "docket"). */
  readonly applicationName?: string | undefined
  /**
   * PostgreSQL: how long a statement may go without an answer before its
   * connection is closed and it fails (default 30 s; "infinity" for none).
   * A client-side bound, for a database gone silent (a partition): see
   * docs/operations.md. Raise it for a migration or query that takes longer.
   */
  readonly statementTimeout?: Duration.DurationInput | "infinity" | undefined
  /**
   * PostgreSQL: TLS, as libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`
   * and `sslpassword` (in the URL, or here; a setting in both must agree).
   * Every connection Docket opens uses them: the pool and the LISTEN
   * connection (a statement's cancel is PostgreSQL's cancel request, which
   * carries no data but the session's key, as libpq's PQcancel). See docs/operations.md, "TLS", for where Docket differs
   * from libpq and from node-postgres.
   */
  readonly tls?: TlsOptions | undefined
  /**
   * PostgreSQL: a URL for the worker pools' LISTEN connections only (default:
   * the database's own). For a database URL that goes through a
   * transaction-pooling PgBouncer, where LISTEN hears nothing: a direct (or
   * session-pooled) URL of the same database, one connection per pool.
   * Without it a pool behind such a pooler finds out, warns once and polls
   * (docs/scaling.md, "PgBouncer").
   */
  readonly listenDatabase?: string | undefined
  /**
   * PostgreSQL: the schema Docket's tables, functions and channels live in
   * (default "public", where every database made before this option has
   * them). A plain lower-case identifier of at most 49 characters; made by
   * the migrations if missing (when the role may). Another schema keeps two
   * applications in one database apart and lets workers run as a role with
   * only `docket grants`' privileges: docs/operations.md, "A schema of its
   * own". Not for SQLite (an `InvalidInput` on `schema`: a file is its own).
   */
  readonly schema?: string | undefined
}


const sqliteLayer = (filename: string, options: Options) =>
  Layer.effectDiscard(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.all([
        // Another process holding the write lock is waited for, not an error.
        sql.unsafe("PRAGMA busy_timeout = 10000"),
        sql.unsafe(`PRAGMA synchronous = ${options.sqliteSynchronous === "normal" ? "NORMAL" : "FULL"}`),
        sql.unsafe("PRAGMA foreign_keys = ON")
      ], { discard: true }))
  ).pipe(
    Layer.provideMerge(
      Layer.unwrapEffect(
        Effect.map(Effect.promise(() => import("@effect/sql-sqlite-node")), ({ SqliteClient }) => SqliteClient.layer({ filename }))
      )
    )
  )

const checkSqlitePath = (filename: string) =>
  Effect.suspend(() => {
    if (filename === ":memory:") return Effect.void
    const dir = dirname(resolve(filename))
    if (!existsSync(dir)) {
      return Effect.fail(new DatabaseUnavailable({ target: filename, reason: `directory ${dir} does not exist` }))
    }
    if (!statSync(dir).isDirectory()) {
      return Effect.fail(new DatabaseUnavailable({ target: filename, reason: `${dir} is not a directory` }))
    }
    return Effect.void
  })

/**
 * A `SqlClient` for the target, migrated unless `migrate: false`. Fails with
 * `DatabaseUnavailable` (cannot open or connect) or `MigrationFailed`.
 */
export const layer = (
  target: Target | string,
  options: Options = {}
): Layer.Layer<SqlClient.SqlClient, DatabaseUnavailable | MigrationFailed | InvalidInput> => {
  const t = typeof target === "string" ? parse(target) : target
  const name = describe(t)
  const refused = refuseListenDatabase(t, options.listenDatabase)
  if (refused !== undefined) return Layer.fail(new DatabaseUnavailable({ target: name, reason: refused }))
  // The schema is checked before anything is opened.
  const schema = checkSchema(t, options.schema)
  if (Either.isLeft(schema)) return Layer.fail(schema.left)
  const client: Layer.Layer<SqlClient.SqlClient, DatabaseUnavailable> = t._tag === "Pg"
    ? pgLayer(t.url, options).pipe(
      Layer.mapError((cause) =>
        new DatabaseUnavailable({
          target: name,
          reason: String(cause.message),
          // A TLS setting refused before connecting is named (the command's exit code 2: bad input).
          ...(cause.cause instanceof Tls.Refused ? { setting: cause.cause.setting } : {}),
          cause
        })
      ),
      // Beside the client, as DirectPool: the storage, the wake-ups and the
      // migrations read it (internal/pgSchema.ts).
      Layer.provideMerge(Layer.succeed(PgSchema.Current, PgSchema.make(schema.right)))
    )
    : Layer.unwrapEffect(Effect.as(checkSqlitePath(t.filename), sqliteLayer(t.filename, options))).pipe(
      Layer.catchAllCause((cause) =>
        Layer.fail(
          Option.match(causeFailure(cause), {
            onSome: (error) =>
              error instanceof DatabaseUnavailable
                ? error
                : new DatabaseUnavailable({ target: name, reason: String((error as Error).message ?? error), cause: error }),
            onNone: () => new DatabaseUnavailable({ target: name, reason: String(squashMessage(cause)), cause })
          })
        )
      )
    )
  if (options.migrate === false) return client
  // Migrations run without the client-side statement timeout: a backfill or
  // an index build on a large table may rightly take minutes.
  const migrate = Effect.flatMap(Effect.serviceOption(DirectPool.DirectPool), (direct) =>
    Option.isSome(direct) ? direct.value.unbounded(Migrations.run) : Migrations.run)
  return Layer.effectDiscard(migrate).pipe(Layer.provideMerge(client))
}

// Why `listenDatabase` cannot be used with `target`, if it cannot.
const refuseListenDatabase = (target: Target, listenDatabase: string | undefined): string | undefined => {
  if (listenDatabase === undefined) return undefined
  if (target._tag !== "Pg") return "listenDatabase is for PostgreSQL: this database is a SQLite file"
  if (parse(listenDatabase)._tag !== "Pg") {
    return "listenDatabase must be a postgres:// or postgresql:// URL"
  }
  // The LISTEN connection takes the pool's TLS settings: pg would read the
  // URL's own with node-postgres's meanings (internal/tls.ts), so none may be given there.
  if (/[?&](ssl[a-z]*|uselibpqcompat)=/i.test(listenDatabase)) {
    return "listenDatabase: give TLS settings (sslmode, sslrootcert, ...) in the database URL or Database.Options.tls, " +
      "not in listenDatabase: the LISTEN connection uses the pool's"
  }
  return undefined
}

// The schema option, checked: PostgreSQL's a plain identifier, SQLite's none
// but public (a file is its own; silently ignored, two applications sharing a
// file would think themselves apart).
const checkSchema = (target: Target, schema: string | undefined): Either.Either<string, InvalidInput> => {
  if (schema === undefined) return Either.right(PgSchema.PUBLIC)
  if (target._tag === "Sqlite" && schema !== PgSchema.PUBLIC) {
    return Either.left(
      new InvalidInput({
        field: "schema",
        reason: `SQLite has no schemas (${JSON.stringify(schema)} given): a file holds one queue; use a file of its own`
      })
    )
  }
  return PgSchema.check(schema)
}

/**
 * For a PostgreSQL `SqlClient` made elsewhere (an application's own
 * `PgClient.layer`, given to `QueueRepo.layer`): the schema Docket's objects
 * live in, provided beside it (`Layer.merge(client, Database.schemaLayer("docket"))`).
 * `layer` provides it itself from `Options.schema`. A bad name fails it with
 * an `InvalidInput` on `schema`.
 */
export const schemaLayer = (schema: string): Layer.Layer<never, InvalidInput> =>
  Either.match(PgSchema.check(schema), {
    onLeft: (error) => Layer.fail(error),
    onRight: (name) => Layer.succeedContext(Context.make(PgSchema.Current, PgSchema.make(name)) as Context.Context<never>)
  })

/**
 * The layer from `DOCKET_DATABASE_URL` (default `./docket.db`) and, unless
 * `options` give them, the schema in `DOCKET_SCHEMA` (default public) and
 * `DOCKET_LISTEN_DATABASE_URL` as `listenDatabase`.
 */
export const layerConfig = (options: Options = {}) =>
  Layer.unwrapEffect(
    Effect.map(
      Config.all([
        Config.string("DOCKET_DATABASE_URL").pipe(Config.withDefault(DEFAULT_URL)),
        Config.option(Config.string("DOCKET_LISTEN_DATABASE_URL")),
        Config.option(Config.string("DOCKET_SCHEMA"))
      ]),
      ([url, listen, schema]) =>
        layer(url, {
          ...options,
          listenDatabase: options.listenDatabase ?? Option.getOrUndefined(Option.filter(listen, (u) => u.trim() !== "")),
          schema: options.schema ?? Option.getOrUndefined(schema)
        })
    )
  )

const causeFailure = (cause: Cause.Cause<unknown>): Option.Option<unknown> => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return failure
  const defect = Cause.dieOption(cause)
  return defect
}
const squashMessage = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}
