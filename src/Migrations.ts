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
 *
 * On PostgreSQL the objects go to the schema in context
 * (`Database.Options.schema`, else public): a database already at the latest
 * version is only read (no lock, nothing created), so a role without CREATE
 * starts fine. Otherwise, in a schema other than public, the schema is
 * created if missing (when the role may), each migration runs with `SET
 * LOCAL search_path` to it, so the files, which name objects bare, make them
 * there, and every function then gets `SET search_path` of its schema (but
 * docket_now_ms: pgSchema.ts), so a call resolves its tables there whatever
 * the caller's path (Docket's own statements name them qualified).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Migrator from "@effect/sql/Migrator"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { MigrationFailed } from "./Errors.js"
import { files, type MigrationFile } from "./internal/migrationFiles.js"
import * as PgSchema from "./internal/pgSchema.js"
import * as Transaction from "./internal/transaction.js"

/** The bookkeeping table (migration id, name, time applied). */
export const TABLE = "docket_migrations"

// PostgreSQL: a migration, and a migrator's wait for another's lock, may
// rightly take longer than the role's statement_timeout (a provider may set it
// low: internal/sessionLimits.ts); lifted for their own transaction only.
const UNBOUNDED = "SET LOCAL statement_timeout = 0"

const PERMISSION_DENIED = "42501"
/** The server's error under a SqlError. */
const serverError = (cause: unknown) => (cause as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause
const denied = (cause: unknown): boolean => serverError(cause)?.code === PERMISSION_DENIED
/** What the server said, else the SqlError's own message. */
const said = (cause: { readonly message: string }): string => {
  const message = serverError(cause)?.message
  return typeof message === "string" ? message : cause.message
}

// Docket's functions in the schema without a search_path of their own (a
// migration's CREATE OR REPLACE drops it; ALTER ... SET SCHEMA keeps none).
const unpinned = (schema: PgSchema.PgSchema) => `SELECT p.oid FROM pg_proc p
    WHERE p.pronamespace = '${schema.quoted}'::regnamespace AND p.proname LIKE 'docket\\_%'
      AND p.proname <> ALL ('{${PgSchema.UNPINNED_FUNCTIONS.join(",")}}'::text[])
      AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\\_path=%')`

// Each of them gets the schema's (after each migration).
const pinFunctions = (schema: PgSchema.PgSchema) => `DO $pin$
DECLARE f regprocedure;
BEGIN
  FOR f IN ${unpinned(schema)}
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_catalog', f, '${schema.name}');
  END LOOP;
END
$pin$`

/**
 * PostgreSQL, a schema other than public that is up to date: its functions
 * pinned if one is not (objects moved from public with ALTER ... SET SCHEMA:
 * docs/operations.md), which needs its owner; otherwise only read.
 */
const pinIfNeeded = (schema: PgSchema.PgSchema) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [{ n }] = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM (${unpinned(schema)}) f`)
    if (n > 0) yield* Transaction.typed(sql)(sql.unsafe(pinFunctions(schema)))
  }).pipe(Effect.mapError((cause) =>
    new MigrationFailed({
      reason: denied(cause)
        ? `functions of schema ${schema.name} have no search_path of their own (moved from public?) and this role ` +
          `may not set it (${said(cause)}): run docket migrate --schema ${schema.name} as the schema's owner`
        : `cannot read schema ${schema.name}'s functions: ${said(cause)}`,
      cause
    })
  ))

const loader = (migrations: ReadonlyArray<MigrationFile>, schema: PgSchema.PgSchema | null): Migrator.Loader =>
  Effect.succeed(
    migrations.map((m): Migrator.ResolvedMigration => [
      m.id,
      m.name,
      Effect.succeed(
        Effect.flatMap(SqlClient.SqlClient, (sql) => {
          // Public runs as before the option, on the connection's path (a
          // database whose objects a "$user" schema took keeps them there),
          // its functions unpinned: the statements that call them name them
          // bare too, so the caller's path finds both or neither.
          const statements = schema === null ? m.statements : schema.isPublic ? [UNBOUNDED, ...m.statements] : [
            UNBOUNDED,
            `SET LOCAL search_path TO ${schema.quoted}`,
            ...m.statements,
            pinFunctions(schema)
          ]
          return Effect.forEach(statements, (statement) => sql.unsafe(statement), { discard: true })
        })
      )
    ])
  )

const runMigrator = Migrator.make({})

/** The latest migration applied to the database, 0 for none. */
const applied = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.unsafe<{ id: number | string | null }>(`SELECT max(migration_id) AS id FROM ${table}`).pipe(
      Effect.map((rows) => Number(rows[0]?.id ?? 0))
    ))


/**
 * PostgreSQL: the version applied in the schema, read only (0 when it has no
 * bookkeeping table, or does not exist).
 */
const pgVersion = (schema: PgSchema.PgSchema) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const table = schema.object(TABLE)
    const [found] = yield* sql.unsafe<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [table])
    return found.present ? yield* applied(table) : 0
  }).pipe(Effect.mapError((cause) =>
    new MigrationFailed({
      reason: denied(cause)
        ? `this role may not use schema ${schema.name} (${said(cause)}): ` +
          `grant it the privileges \`docket grants --schema ${schema.name}\` prints`
        : `cannot read the schema version: ${said(cause)}`,
      cause
    })
  ))

/** PostgreSQL: the schema made if missing (by this role, when it may), and the bookkeeping table in it. */
const pgPrepare = (schema: PgSchema.PgSchema) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (!schema.isPublic) {
      // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the
      // schema exists: asked only when it does not.
      const [exists] = yield* sql.unsafe<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1`,
        [schema.name]
      )
      if (exists.n === 0) {
        yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS ${schema.quoted}`).pipe(Effect.mapError((cause) =>
          new MigrationFailed({
            reason: denied(cause)
              ? `schema ${schema.name} does not exist and this role may not create it (${said(cause)}): ` +
                `create it for the role that migrates, e.g. CREATE SCHEMA ${schema.name} AUTHORIZATION <role> ` +
                `(docs/operations.md, "A schema of its own")`
              : `cannot create schema ${schema.name}: ${said(cause)}`,
            cause
          })
        ))
      }
    }
    // Effect's Migrator checks for its table and then creates it: two migrators
    // starting together could both try to create it. Create it first, under a
    // lock (public keeps the key of the releases before the option).
    const table = schema.object(TABLE)
    const key = schema.isPublic ? TABLE : `${schema.name}.${TABLE}`
    yield* Transaction.typed(sql)(
      Effect.zipRight(
        Effect.zipRight(sql.unsafe(UNBOUNDED), sql.unsafe(`SELECT pg_advisory_xact_lock(hashtext('${key}'))`)),
        sql.unsafe(`CREATE TABLE IF NOT EXISTS ${table} (
          migration_id integer PRIMARY KEY,
          created_at timestamptz NOT NULL DEFAULT now(),
          name text NOT NULL)`)
      )
    ).pipe(Effect.mapError((cause) =>
      new MigrationFailed({
        reason: denied(cause)
          ? `this role may not create tables in schema ${schema.name} (${said(cause)}): ` +
            `run the migrations as the role that owns it`
          : "cannot create the migrations table",
        cause
      })
    ))
  }).pipe(Effect.catchTag("SqlError", (cause) =>
    Effect.fail(new MigrationFailed({ reason: `cannot read schema ${schema.name}: ${said(cause)}`, cause }))))

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
  const schema = dialect === "pg" ? yield* PgSchema.current : null
  if (schema !== null) {
    // Up to date: nothing is locked or created, so a role without CREATE (a
    // worker's least-privileged role) starts with migrate on.
    if ((yield* pgVersion(schema)) >= latest) {
      if (!schema.isPublic) yield* pinIfNeeded(schema)
      return []
    }
    yield* pgPrepare(schema)
  }
  const table = schema === null ? TABLE : schema.object(TABLE).replaceAll("\"", "")
  const done = yield* runMigrator({ loader: loader(migrations, schema), table }).pipe(
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
  yield* applied(schema === null ? TABLE : schema.object(TABLE)).pipe(
    Effect.flatMap((version) =>
      version >= latest ? Effect.void : Effect.fail(new MigrationFailed({ reason: `schema at ${version}, want ${latest}` }))),
    Effect.catchTag("SqlError", (cause) => Effect.fail(new MigrationFailed({ reason: "cannot read the schema version", cause }))),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("30 seconds")))
  )
  return done.map(([id]) => id)
}).pipe(Effect.withSpan("docket.migrate"))
