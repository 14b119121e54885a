/**
 * LISTEN on a connection of Docket's own. Effect's `PgClient.listen` keeps one
 * shared listening connection and ignores its errors: after a database restart
 * it stays dead and no notification ever arrives again. Here a lost
 * connection ends the listen with an error, and the worker reconnects.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import type pg from "pg"
import * as SessionLimits from "./sessionLimits.js"

const clientConfig = (config: PgClient.PgClientConfig): pg.ClientConfig => ({
  ...(config.url !== undefined
    ? { connectionString: Redacted.value(config.url) }
    : {
      host: config.host ?? config.path,
      port: config.port,
      database: config.database,
      user: config.username,
      password: config.password === undefined ? undefined : Redacted.value(config.password)
    }),
  // The pool's TLS options: under Database.layer, libpq's sslmode as resolved
  // once (internal/tls.ts; with allow/prefer, whichever connected first).
  ssl: config.ssl,
  application_name: `${config.applicationName ?? "docket"} listen`,
  connectionTimeoutMillis: 10_000,
  keepAlive: true
})

// A server that ends idle sessions (idle_session_timeout, set by a provider
// on the role) would end the listening one between notifications, and the
// ones sent until it is open again would be lost: it runs a statement at half
// the limit instead (internal/sessionLimits.ts). A failed one is reported by
// the connection's "error" or "end".
const keepAlive = (client: pg.Client) =>
  Effect.flatMap(
    Effect.tryPromise({
      try: () => client.query<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'idle_session_timeout'`),
      catch: (cause) => new Error(`cannot read idle_session_timeout: ${String(cause)}`)
    }),
    (result) => {
      const every = SessionLimits.keepAliveMs(Number(result.rows[0]?.setting ?? 0))
      if (every === undefined) return Effect.void
      return Effect.acquireRelease(
        Effect.sync(() => setInterval(() => client.query("SELECT 1").catch(() => undefined), every).unref()),
        (timer) => Effect.sync(() => clearInterval(timer))
      )
    }
  )

/**
 * Listens on `channels`, calling `onNotification` with the channel and the
 * payload of each notification, and `onListening` once LISTEN is active on
 * all of them. Runs until the connection is lost (then fails) or it is
 * interrupted (then it closes the connection).
 */
export const listen = (
  config: PgClient.PgClientConfig,
  channels: ReadonlyArray<string>,
  onListening: () => void,
  onNotification: (channel: string, payload: string) => void
): Effect.Effect<never, Error> =>
  Effect.scoped(
    Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            // Loaded here, not at the top: a SQLite application never loads pg.
            const { default: Pg } = await import("pg")
            const client = new Pg.Client(clientConfig(config))
            client.on("error", () => {}) // reported through the "end" below
            await client.connect()
            return client
          },
          catch: (cause) => new Error(`cannot connect to listen: ${String(cause)}`)
        }),
        (client) => Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption(1000))
      )
      client.on("notification", (message) => {
        if (channels.includes(message.channel)) onNotification(message.channel, message.payload ?? "")
      })
      yield* Effect.tryPromise({
        try: () => client.query(channels.map((channel) => `LISTEN ${client.escapeIdentifier(channel)};`).join(" ")),
        catch: (cause) => new Error(`cannot LISTEN: ${String(cause)}`)
      })
      yield* keepAlive(client)
      onListening()
      return yield* Effect.async<never, Error>((resume) => {
        const lost = (error?: Error) => resume(Effect.fail(new Error(`listen connection lost${error ? `: ${error.message}` : ""}`)))
        client.once("end", () => lost())
        client.once("error", lost)
      })
    })
  )
