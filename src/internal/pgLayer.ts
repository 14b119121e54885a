/**
 * The PostgreSQL side of `Database.layer`: the pg pool Docket makes itself
 * (TLS with libpq's meanings, keepalive, the client-side statement timeout,
 * the server's session limits read by its first statement), the PgClient
 * built over it, and the direct pool Docket's hot statements use.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as DirectPool from "./directPool.js"
import { ListenDatabase } from "./listen.js"
import * as SessionLimits from "./sessionLimits.js"
import * as StatementTimeout from "./statementTimeout.js"
import * as Tls from "./tls.js"

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
/** What the pool takes of `Database.Options` (declared here: Database.ts imports this module). */
export interface PgOptions {
  readonly maxConnections?: number | undefined
  readonly applicationName?: string | undefined
  readonly statementTimeout?: Duration.DurationInput | "infinity" | undefined
  readonly tls?: Tls.TlsOptions | undefined
  readonly listenDatabase?: string | undefined
}

export const pgLayer = (url: string, options: PgOptions) =>
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
            types: DirectPool.int8Numbers(Pg.types),
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
const statementTimeoutMs = (input: PgOptions["statementTimeout"]): Effect.Effect<number, SqlError> => {
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
