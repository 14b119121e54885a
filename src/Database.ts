/**
 * Connecting Docket to its database: a `SqlClient` layer for PostgreSQL or a
 * SQLite file, chosen from a URL, with the schema migrated when the layer is
 * built (unless told not to).
 *
 * `postgres://` or `postgresql://` means PostgreSQL; anything else is a SQLite
 * file path (`sqlite:` / `file:` prefixes are accepted and removed).
 */
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Config, Context, Duration, Effect, Either, Layer, Option } from "effect"
import { existsSync, statSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { DatabaseUnavailable, InvalidInput, type MigrationFailed } from "./Errors.js"
import * as DirectPool from "./internal/directPool.js"
import * as PgSchema from "./internal/pgSchema.js"
import * as StatementTimeout from "./internal/statementTimeout.js"
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

/** A URL for logs: the password hidden. */
export const describe = (target: Target): string =>
  target._tag === "Pg" ? target.url.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@") : target.filename

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

/** The default client-side statement timeout on PostgreSQL (docs/operations.md). */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000
/** TCP keepalive on PostgreSQL connections: the first probe after this long idle (docs/operations.md). */
export const KEEPALIVE_IDLE_MS = 10_000

// Each dialect's driver is loaded only when a layer for it is built, so a
// PostgreSQL worker does not load SQLite's native module, nor a SQLite one pg.
//
// On PostgreSQL Docket makes the pg pool itself and builds the PgClient over it
// (`PgClient.fromPool`, the same settings `PgClient.layer` would use), so its
// own hot statements can go to the pool directly (internal/directPool.ts, `runner`).
const pgLayer = (url: string, options: Options) =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() =>
        Promise.all([import("@effect/sql-pg"), import("pg"), import("@effect/experimental/Reactivity")])
      ),
      ([{ PgClient }, { default: Pg }, Reactivity]) =>
        Layer.scopedContext(Effect.gen(function*() {
          const applicationName = options.applicationName ?? "docket"
          // The pool's connections and the cancel's own connection (see below).
          // Keepalive: an idle connection (the LISTEN one) whose server vanished
          // is found dead instead of waiting for ever (docs/operations.md).
          const connection = {
            connectionString: url,
            connectionTimeoutMillis: 10_000,
            keepAlive: true,
            keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS
          }
          const timeoutMs = yield* statementTimeoutMs(options.statementTimeout)
          const pool = new Pg.Pool({ ...connection, max: options.maxConnections ?? 10, application_name: applicationName })
          // A broken idle connection is dropped by the pool; the next query
          // reports what is wrong.
          pool.on("error", () => {})
          let bound = timeoutMs
          pool.on("connect", (client) => {
            // A connection the server ends while it is checked out but idle
            // (an administrator's pg_terminate_backend, a database dropped
            // WITH (FORCE)) reports the FATAL as an 'error' event, and
            // pg-pool listens only while a connection is idle in the pool: with
            // no listener Node would end the process. Its next statement
            // fails with the cause instead, as any other broken connection.
            client.on("error", () => {})
            StatementTimeout.bound(client, () => bound)
          })
          yield* Effect.addFinalizer(() =>
            Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
          )
          yield* Effect.tryPromise({
            try: () => pool.query("SELECT 1"),
            catch: (cause) => new SqlError({ cause, message: `Failed to connect: ${messageOf(cause)}` })
          }).pipe(Effect.timeoutFail({
            duration: "10 seconds",
            onTimeout: () => new SqlError({ cause: new Error("timed out"), message: "Failed to connect: timed out after 10 s" })
          }))
          const client = yield* PgClient.fromPool({ acquire: Effect.succeed(pool), applicationName })
          const direct: DirectPool.Service = {
            client,
            pool,
            cancel: async (processId) => {
              const canceller = new Pg.Client({
                ...connection,
                application_name: `${applicationName} cancel`,
                connectionTimeoutMillis: 5000,
                // A cancel on a silent database gets no answer either.
                query_timeout: 5000
              })
              try {
                await canceller.connect()
                await canceller.query("SELECT pg_cancel_backend($1)", [processId])
              } finally {
                await canceller.end().catch(() => {})
              }
            },
            unbounded: (effect) =>
              Effect.acquireUseRelease(
                Effect.sync(() => {
                  bound = 0
                }),
                () => effect,
                () =>
                  Effect.sync(() => {
                    bound = timeoutMs
                  })
              )
          }
          return Context.make(PgClient.PgClient, client).pipe(
            Context.add(SqlClient.SqlClient, client),
            Context.add(DirectPool.DirectPool, direct)
          )
        })).pipe(Layer.provide(Reactivity.layer))
    )
  )

// The statement timeout in ms (Infinity for none); a value that is not a
// duration fails the layer with a reason that says so (no pool is made).
const statementTimeoutMs = (input: Options["statementTimeout"]): Effect.Effect<number, SqlError> => {
  if (input === undefined) return Effect.succeed(DEFAULT_STATEMENT_TIMEOUT_MS)
  if (typeof input === "string" && input.trim().toLowerCase() === "infinity") return Effect.succeed(Infinity)
  return Option.match(Duration.decodeUnknown(input), {
    onNone: () =>
      Effect.fail(
        new SqlError({
          cause: new Error("bad statementTimeout"),
          message: `statementTimeout: ${JSON.stringify(String(input))} is not a duration (e.g. "30 seconds", or "infinity" for none)`
        })
      ),
    onSome: (duration) => Effect.succeed(Duration.toMillis(duration))
  })
}

const messageOf = (cause: unknown): string => cause instanceof Error ? cause.message : String(cause)

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
  // The schema is checked before anything is opened.
  const schema = checkSchema(t, options.schema)
  if (Either.isLeft(schema)) return Layer.fail(schema.left)
  const client: Layer.Layer<SqlClient.SqlClient, DatabaseUnavailable> = t._tag === "Pg"
    ? pgLayer(t.url, options).pipe(
      Layer.mapError((cause) => new DatabaseUnavailable({ target: name, reason: String(cause.message), cause })),
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
 * `options` give one, the schema in `DOCKET_SCHEMA` (default public).
 */
export const layerConfig = (options: Options = {}) =>
  Layer.unwrapEffect(
    Effect.map(
      Config.all([
        Config.string("DOCKET_DATABASE_URL").pipe(Config.withDefault(DEFAULT_URL)),
        Config.option(Config.string("DOCKET_SCHEMA"))
      ]),
      ([url, schema]) =>
        layer(url, { ...options, schema: options.schema ?? Option.getOrUndefined(schema) })
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
