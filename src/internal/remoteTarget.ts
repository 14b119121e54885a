/**
 * Where a process hears of other processes' changes, for the database in
 * context: on PostgreSQL, a LISTEN connection with the pool's settings (its
 * own URL when `Database.Options.listenDatabase` is given) and a probe sent
 * through the pool (listen.ts); on a SQLite file that can be watched, the
 * file (sqliteWatch.ts); else nowhere (an in-memory SQLite database, which no
 * other process sees). Wakeups.ts (the pools' wake-ups) and the workflow
 * engine's waiters (workflow/waiters.ts) both listen through it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { ListenDatabase, type Probe } from "./listen.js"
import * as PgSchema from "./pgSchema.js"
import * as SqliteWatch from "./sqliteWatch.js"

/** Where to hear other processes' changes. */
export type RemoteTarget =
  | {
    readonly _tag: "Pg"
    /** The LISTEN connection's settings. */
    readonly config: PgClient.PgClientConfig
    /** `Database.Options.listenDatabase`, when given. */
    readonly listenDatabase: string | undefined
    readonly schema: PgSchema.PgSchema
    readonly probe: Probe
  }
  | { readonly _tag: "Sqlite"; readonly filename: string }
  | { readonly _tag: "None" }

// The drivers' client tags by their keys: importing their modules for the
// tags would load the PostgreSQL driver into SQLite applications and back.
const PgClientTag = Context.GenericTag<PgClient.PgClient>("@effect/sql-pg/PgClient")
const SqliteClientTag = Context.GenericTag<{ readonly config: { readonly filename: string } }>(
  "@effect/sql-sqlite-node/SqliteClient"
)

/** The target for the `SqlClient` in context. */
export const remoteTarget: Effect.Effect<RemoteTarget, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const pg = yield* Effect.serviceOption(PgClientTag)
  const sqlite = yield* Effect.serviceOption(SqliteClientTag)
  const dialect = sql.onDialectOrElse({ pg: () => "pg", sqlite: () => "sqlite", orElse: () => "other" })
  if (dialect === "pg" && Option.isSome(pg)) {
    const given = Option.map(yield* Effect.serviceOption(ListenDatabase), (d) => d.url)
    return {
      _tag: "Pg",
      config: Option.match(given, {
        onNone: () => pg.value.config,
        // Its own URL; the pool's other settings (TLS, application name) as they are.
        onSome: (url) => ({ ...pg.value.config, url: Redacted.make(url) })
      }),
      listenDatabase: Option.getOrUndefined(given),
      schema: yield* PgSchema.current,
      probe: (channel, payload) => sql.unsafe("SELECT pg_notify($1, $2)", [channel, payload])
    }
  }
  if (dialect === "sqlite" && Option.isSome(sqlite) && SqliteWatch.watchable(sqlite.value.config.filename)) {
    return { _tag: "Sqlite", filename: sqlite.value.config.filename }
  }
  return { _tag: "None" }
})
