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
import * as SessionLimits from "./internal/sessionLimits.js"
import { ListenDatabase } from "./internal/listen.js"
import * as StatementTimeout from "./internal/statementTimeout.js"
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

/** The default client-side statement timeout on PostgreSQL (docs/operations.md). */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000
/** How long the pg pool keeps an idle connection (pg's default), unless the server ends idle sessions sooner. */
const POOL_IDLE_MS = 10_000
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
          // TLS read with libpq's meanings, taken out of the URL pg reads (internal/tls.ts).
          const tls = yield* tlsSettings(url, options.tls)
          const base = {
            connectionString: tls.url,
            connectionTimeoutMillis: 10_000,
            keepAlive: true,
            keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS
          }
          // allow and prefer: the first way that connects is kept for every connection.
          const ssl = yield* Effect.tryPromise({
            try: () => Tls.choose(tls, (ssl) => tryConnect(Pg, { ...base, ssl, application_name: applicationName })),
            catch: (cause) => new SqlError({ cause, message: `Failed to connect: ${messageOf(cause)}` })
          })
          // The pool's connections and the cancel's own connection (see below).
          // Keepalive: an idle connection (the LISTEN one) whose server vanished
          // is found dead instead of waiting for ever (docs/operations.md).
          // The LISTEN connection copies the pool's settings (internal/listen.ts).
          const connection = { ...base, ssl }
          const timeoutMs = yield* statementTimeoutMs(options.statementTimeout)
          // Where a cancel request goes: the host and port pg resolves from the URL (no connection made).
          const { host, port } = new Pg.Client(connection)
          const address = { host, port }
          const pool = new Pg.Pool({
            ...connection,
            max: options.maxConnections ?? 10,
            application_name: applicationName,
            idleTimeoutMillis: POOL_IDLE_MS
          })
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
          const limits = yield* firstStatement(pool, tls)
          pool.options.idleTimeoutMillis = SessionLimits.poolIdleMs(limits, POOL_IDLE_MS)
          const warning = SessionLimits.warning(limits)
          if (warning !== undefined) yield* Effect.logWarning(warning)
          const client = yield* PgClient.fromPool({ acquire: Effect.succeed(pool), applicationName })
          const direct: DirectPool.Service = {
            client,
            pool,
            // A cancel on a silent database gets no answer either: 5 s.
            cancel: (session) => DirectPool.cancelRequest(address, session, 5000),
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
          const context = Context.make(PgClient.PgClient, client).pipe(
            Context.add(SqlClient.SqlClient, client),
            Context.add(DirectPool.DirectPool, direct)
          )
          return options.listenDatabase === undefined
            ? context
            : Context.add(context, ListenDatabase, { url: options.listenDatabase })
        })).pipe(Layer.provide(Reactivity.layer))
    )
  )

// The first statement proves the connection and reads the server's limits
// on the role's sessions (internal/sessionLimits.ts).
const firstStatement = (
  pool: { query: <R extends object>(text: string) => Promise<{ rows: Array<R> }> },
  tls: Tls.Resolved
): Effect.Effect<SessionLimits.Limits, SqlError> =>
  Effect.tryPromise({
    try: () => pool.query<{ name: string; setting: string }>(SessionLimits.QUERY),
    catch: (cause) => new SqlError({ cause, message: `Failed to connect: ${Tls.explain(cause, tls)}` })
  }).pipe(
    Effect.timeoutFail({
      duration: "10 seconds",
      onTimeout: () => new SqlError({ cause: new Error("timed out"), message: "Failed to connect: timed out after 10 s" })
    }),
    Effect.map((result) => SessionLimits.fromRows(result.rows))
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

// The TLS settings, or the layer's failure naming the setting that is wrong (nothing connected).
const tlsSettings = (url: string, options: Tls.TlsOptions | undefined): Effect.Effect<Tls.Resolved, SqlError> =>
  Effect.suspend(() => {
    const resolved = Tls.resolve(url, options)
    return "ok" in resolved
      ? Effect.succeed(resolved.ok)
      : Effect.fail(new SqlError({ cause: resolved.error, message: resolved.error.message }))
  })

// One connection, closed at once: does this way of connecting work?
const tryConnect = async (Pg: typeof import("pg").default, config: import("pg").ClientConfig): Promise<void> => {
  const client = new Pg.Client(config)
  client.on("error", () => {})
  try {
    await client.connect()
  } finally {
    await client.end().catch(() => {})
  }
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
  // The schema is checked before anything is opened.
  const schema = checkSchema(t, options.schema)
  if (Either.isLeft(schema)) return Layer.fail(schema.left)
  const refused = refuseListenDatabase(t, options.listenDatabase)
  if (refused !== undefined) return Layer.fail(new DatabaseUnavailable({ target: name, reason: refused }))
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
 * The layer from `DOCKET_DATABASE_URL` (default `./docket.db`), and
 * `DOCKET_LISTEN_DATABASE_URL` as `listenDatabase` and `DOCKET_SCHEMA` as
 * `schema` when `options` give none.
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
          schema: options.schema ?? Option.getOrUndefined(Option.filter(schema, (s) => s.trim() !== ""))
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
