/**
 * LISTEN on a connection of Docket's own. Effect's `PgClient.listen` keeps one
 * shared listening connection and ignores its errors: after a database restart
 * it stays dead and no notification ever arrives again. Here a lost
 * connection ends the listen with an error, and the worker reconnects.
 *
 * Before it listens on Docket's channels, the connection proves that it hears
 * what the pool sends: it listens on a probe channel, a notification with a
 * payload of its own goes out through the pool (`probe`), and it must arrive
 * within `PROBE_MS` of the send's commit. Behind a transaction-pooling
 * PgBouncer it never does: the session that ran LISTEN is handed to other
 * clients between transactions, and PgBouncer drops a notification that
 * reaches a server connection no client holds ("got packet 'A' from server
 * when not linked" in its log). Nor does it when the LISTEN connection goes to
 * another database than the pool. Then `listen` fails with `NotHeard` and the
 * caller stops listening (Wakeups.ts: one warning, the poll instead). The
 * probe tests what matters (do the pool's notifications arrive here?) rather
 * than the pooler: the backend's pid read twice would not tell a transaction
 * pool from a session, since an idle pool hands the same server connection
 * back (PgBouncer reuses the last one freed), and a port or a SHOW would
 * name PgBouncer but not a misdirected listenDatabase.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import type pg from "pg"
import * as SessionLimits from "./sessionLimits.js"

/** The channel of the probe: its payloads are unique, so listeners of other pools ignore them. */
export const PROBE_CHANNEL = "docket_probe"

/**
 * How long the probe's notification may take to arrive after its commit.
 * PostgreSQL delivers one to an idle listener at once (a millisecond here);
 * the bound is for a loaded machine. The pool claims meanwhile as ever (its
 * poll, this process's enqueues), so the bound delays only the verdict.
 */
export const PROBE_MS = 5000

/**
 * A URL for the LISTEN connections only (`Database.Options.listenDatabase`),
 * in the context Database.layer builds beside the client when one is given.
 */
export class ListenDatabase extends Context.Tag("docket/ListenDatabase")<ListenDatabase, { readonly url: string }>() {}

/** The probe's notification never reached the LISTEN connection: notifications do not reach it. */
export class NotHeard extends Data.TaggedError("NotHeard")<{ readonly waitedMs: number }> {}

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

/** Sends `pg_notify(channel, payload)` through the pool, resolving at its commit. */
export type Probe = (channel: string, payload: string) => Effect.Effect<void, unknown>

/**
 * Listens on `channels`, calling `onNotification` with the channel and the
 * payload of each notification, and `onListening` once LISTEN is active on
 * all of them (after the probe). Runs until the connection is lost (then
 * fails), the probe is not heard (fails with `NotHeard`) or it is
 * interrupted (then it closes the connection).
 */
export const listen = (
  config: PgClient.PgClientConfig,
  channels: ReadonlyArray<string>,
  probe: Probe,
  onListening: () => void,
  onNotification: (channel: string, payload: string) => void
): Effect.Effect<never, Error | NotHeard> =>
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
      const query = (text: string, what: string) =>
        Effect.tryPromise({ try: () => client.query(text), catch: (cause) => new Error(`${what}: ${String(cause)}`) })
      const payload = `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`
      const heard = yield* Deferred.make<void>()
      client.on("notification", (message) => {
        if (message.channel === PROBE_CHANNEL) {
          if (message.payload === payload) Deferred.unsafeDone(heard, Exit.void)
        } else if (channels.includes(message.channel)) onNotification(message.channel, message.payload ?? "")
      })
      yield* keepAlive(client)
      yield* query(`LISTEN ${PROBE_CHANNEL}`, "cannot LISTEN")
      yield* probe(PROBE_CHANNEL, payload).pipe(Effect.mapError((cause) => new Error(`cannot send the LISTEN probe: ${String(cause)}`)))
      const sent = Date.now()
      yield* Effect.timeoutOption(Deferred.await(heard), PROBE_MS)
      // A round trip on the connection itself reads whatever arrived before
      // it: after a stalled event loop, the timer can fire before the socket
      // is read. (Behind a transaction pooler this statement may run on the
      // very server connection that listened, but the probe's notification
      // reached it seconds ago, when no client held it, and was dropped.)
      if (!(yield* Deferred.isDone(heard))) yield* query("SELECT 1", "cannot finish the LISTEN probe")
      if (!(yield* Deferred.isDone(heard))) {
        // Best effort: behind a transaction pooler this reaches whichever
        // server connection is free, not necessarily the one that listened.
        yield* Effect.ignore(query("UNLISTEN *", "cannot UNLISTEN"))
        return yield* new NotHeard({ waitedMs: Date.now() - sent })
      }
      yield* query(
        [`UNLISTEN ${PROBE_CHANNEL};`, ...channels.map((channel) => `LISTEN ${client.escapeIdentifier(channel)};`)].join(" "),
        "cannot LISTEN"
      )
      onListening()
      return yield* Effect.async<never, Error>((resume) => {
        const lost = (error?: Error) => resume(Effect.fail(new Error(`listen connection lost${error ? `: ${error.message}` : ""}`)))
        client.once("end", () => lost())
        client.once("error", lost)
      })
    })
  )
