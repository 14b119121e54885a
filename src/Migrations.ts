/**
 * Docket's schema migrations: forward-only numbered SQL files in
 * `migrations/pg/` and `migrations/sqlite/` (the same numbers in both), applied
 * through Effect's `Migrator` with a loader that reads the SQL files (no `.ts`
 * imports, so it works under tsx, vitest and plain node alike).
 *
 * Any number of processes may migrate at the same moment; each returns once
 * the schema is at the latest version. PostgreSQL serialises migrators with a
 * table lock (and an advisory lock around creating the bookkeeping table);
 * SQLite serialises writers, and a migrator that lost the race waits until
 * the winner has committed.
 */
import { SqlClient } from "@effect/sql"
import * as Migrator from "@effect/sql/Migrator"
import { Effect, Schedule } from "effect"
import { MigrationFailed } from "./Errors.js"
import { files, type MigrationFile } from "./internal/migrationFiles.js"
import * as Transaction from "./internal/transaction.js"

/** The bookkeeping table (migration id, name, time applied). */
export const TABLE = "docket_migrations"

// PostgreSQL: a migration, and a migrator's wait for another's lock, may
// rightly take longer than the role's statement_timeout (a provider may set it
// low: internal/sessionLimits.ts); lifted for their own transaction only.
const UNBOUNDED = "SET LOCAL statement_timeout = 0"

const loader = (migrations: ReadonlyArray<MigrationFile>, prelude: ReadonlyArray<string>): Migrator.Loader =>
  Effect.succeed(
    migrations.map((m): Migrator.ResolvedMigration => [
      m.id,
      m.name,
      Effect.succeed(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          Effect.forEach([...prelude, ...m.statements], (statement) => sql.unsafe(statement), { discard: true }))
      )
    ])
  )

const runMigrator = Migrator.make({})

/** The latest migration applied to the database, 0 for none. */
const applied = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe<{ id: number | string | null }>(`SELECT max(migration_id) AS id FROM ${TABLE}`).pipe(
    Effect.map((rows) => Number(rows[0]?.id ?? 0))
  ))

/**
 * Brings the database in context to the latest schema. Returns the ids this
 * call applied (empty when another process did, or nothing was due).
 */
export const run: Effect.Effect<ReadonlyArray<number>, MigrationFailed, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, sqlite: () => "sqlite" as const, orElse: () => null })
  if (dialect === null) return yield* new MigrationFailed({ reason: "Docket supports PostgreSQL and SQLite only" })
  const migrations = yield* files(dialect)
  const latest = migrations.reduce((max, m) => Math.max(max, m.id), 0)
  if (dialect === "pg") {
    // Effect's Migrator checks for its table and then creates it: two migrators
    // starting together could both try to create it. Create it first, under a lock.
    yield* Transaction.typed(sql)(
      Effect.zipRight(
        Effect.zipRight(sql.unsafe(UNBOUNDED), sql.unsafe(`SELECT pg_advisory_xact_lock(hashtext('${TABLE}'))`)),
        sql.unsafe(`CREATE TABLE IF NOT EXISTS ${TABLE} (
          migration_id integer PRIMARY KEY,
          created_at timestamptz NOT NULL DEFAULT now(),
          name text NOT NULL)`)
      )
    ).pipe(Effect.mapError((cause) => new MigrationFailed({ reason: "cannot create the migrations table", cause })))
  }
  const done = yield* runMigrator({ loader: loader(migrations, dialect === "pg" ? [UNBOUNDED] : []), table: TABLE }).pipe(
    Effect.catchTag("MigrationError", (error) =>
      error.reason === "locked" ? Effect.succeed([]) : Effect.fail(error)),
    // SQLite: a migrator whose snapshot went stale while another wrote is refused; it then waits below.
    Effect.catchTag("SqlError", (error) =>
      dialect === "sqlite" && /SQLITE_BUSY/.test(String((error.cause as { code?: string } | undefined)?.code))
        ? Effect.succeed([])
        : Effect.fail(error)),
    Effect.mapError((cause) => new MigrationFailed({ reason: cause.message, cause }))
  )
  // Wait (bounded) until whichever migrator won has committed the latest version.
  yield* applied.pipe(
    Effect.flatMap((version) =>
      version >= latest ? Effect.void : Effect.fail(new MigrationFailed({ reason: `schema at ${version}, want ${latest}` }))),
    Effect.catchTag("SqlError", (cause) => Effect.fail(new MigrationFailed({ reason: "cannot read the schema version", cause }))),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("30 seconds")))
  )
  return done.map(([id]) => id)
}).pipe(Effect.withSpan("docket.migrate"))
