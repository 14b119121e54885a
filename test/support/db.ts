/**
 * Real databases for tests: a fresh SQLite file, or a fresh PostgreSQL database
 * made for the test file and dropped after it.
 *
 * PostgreSQL is reached at DOCKET_TEST_PG_URL (default
 * postgres://root@127.0.0.1:5432/postgres). Outside CI, an unreachable server
 * skips the PostgreSQL tests with a warning; with CI=true it fails them.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import * as Database from "../../src/Database.js"
import * as Grants from "../../src/internal/grants.js"
import * as PgSchema from "../../src/internal/pgSchema.js"
import * as QueueRepo from "../../src/QueueRepo.js"

export const PG_ADMIN_URL = process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"
export const IN_CI = process.env.CI === "true" || process.env.CI === "1"

/** A session of its own on `url` for `f`, ended after (an error the server sends it once ended is ignored). */
export const withClient = async <A>(
  url: string,
  f: (client: pg.Client) => Promise<A>,
  connectionTimeoutMillis?: number
): Promise<A> => {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis })
  client.on("error", () => {})
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

const withAdmin = <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => withClient(PG_ADMIN_URL, f, 5000)

/** Whether PostgreSQL can be reached (checked once per test file). */
export const pgAvailable: boolean = await withAdmin(async () => true).catch((error: unknown) => {
  if (IN_CI) throw new Error(`PostgreSQL is required in CI and cannot be reached at ${PG_ADMIN_URL}: ${String(error)}`)
  console.warn(`PostgreSQL tests skipped: cannot reach ${PG_ADMIN_URL} (${String(error)})`)
  return false
})

const urlFor = (database: string) => {
  const url = new URL(PG_ADMIN_URL)
  url.pathname = `/${database}`
  return url.toString()
}

/** Makes a fresh database (a copy of `template`, if given); returns its URL and a function that drops it. */
export const freshPgDatabase = async (template?: string): Promise<{ url: string; drop: () => Promise<void> }> => {
  const name = `docket_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}${template === undefined ? "" : ` TEMPLATE ${template}`}`))
  return {
    url: urlFor(name),
    drop: () => withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined)
  }
}

/** A fresh directory for SQLite files; removed by the returned function. */
export const freshDir = (): { dir: string; remove: () => void } => {
  const dir = mkdtempSync(join(tmpdir(), "docket-test-"))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

export interface Backend {
  readonly name: "sqlite" | "pg"
  /** A database URL for a fresh, empty database (made on call). */
  readonly fresh: () => Promise<string>
  /** Drops everything made by `fresh`. */
  readonly cleanup: () => Promise<void>
}

export const sqliteBackend = (): Backend => {
  const made: Array<() => void> = []
  return {
    name: "sqlite",
    fresh: async () => {
      const d = freshDir()
      made.push(d.remove)
      return join(d.dir, "docket.db")
    },
    cleanup: async () => {
      for (const remove of made.splice(0)) remove()
    }
  }
}

/**
 * A PostgreSQL backend. Without `schema`: fresh, empty databases, reached as
 * the administrator (the tests migrate them), Docket's objects in public.
 *
 * With `schema`, least privilege: each fresh database has the schema, made
 * by the administrator for an owner role that owns nothing else (no
 * superuser, no CREATE on the database, and PostgreSQL 15 gives none on
 * public), which runs the migrations and applies `docket grants`' statements
 * for an application role; the URL returned is that role's, so everything a
 * test runs through Docket runs with exactly those privileges. Neither role
 * has the schema (nor public's objects, none) on its search_path: a name
 * Docket sends unqualified fails loudly. `repoLayer` gives Docket the schema;
 * DDL a test needs goes through `asAdmin`. The first database is made so
 * (migrated as the owner, granted), and each one after is a copy of it
 * (CREATE DATABASE ... TEMPLATE: schema, privileges and default privileges
 * alike), which takes less than migrating each.
 */
export const pgBackend = (options: { readonly schema?: string } = {}): Backend => {
  const made: Array<() => Promise<void>> = []
  const suffix = `${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const roles = { owner: `docket_t_owner_${suffix}`, app: `docket_t_app_${suffix}` }
  let rolesMade: Promise<void> | undefined
  const makeRoles = () =>
    withAdmin(async (c) => {
      for (const role of [roles.owner, roles.app]) {
        await c.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`)
        await c.query(`ALTER ROLE ${role} SET search_path = docket_nowhere`)
      }
    })
  let template: Promise<string> | undefined
  const makeTemplate = async (schema: string) => {
    await (rolesMade ??= makeRoles())
    const db = await freshPgDatabase()
    made.push(db.drop)
    await leastPrivileged(db.url, schema, roles)
    const name = new URL(db.url).pathname.slice(1)
    // No session may be left on a template (a pool's connection closing late).
    await withAdmin((c) => c.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [name]))
    return name
  }
  return {
    name: "pg",
    fresh: async () => {
      if (options.schema === undefined) {
        const db = await freshPgDatabase()
        made.push(db.drop)
        return db.url
      }
      const db = await freshPgDatabase(await (template ??= makeTemplate(options.schema)))
      made.push(db.drop)
      const appUrl = urlAs(db.url, roles.app)
      schemas.set(appUrl, PgSchema.make(options.schema))
      return appUrl
    },
    // DROP DATABASE forces a checkpoint; dropped together, the drops share
    // checkpoints instead of waiting for one each.
    cleanup: async () => {
      const drops = made.splice(0)
      // A few at a time: each needs a connection of its own.
      const runners = Array.from({ length: 6 }, async () => {
        for (let drop = drops.pop(); drop !== undefined; drop = drops.pop()) await drop()
      })
      await Promise.all(runners)
      if (rolesMade !== undefined) {
        await withAdmin(async (c) => {
          for (const role of [roles.app, roles.owner]) await c.query(`DROP ROLE IF EXISTS ${role}`)
        })
      }
    }
  }
}

/** The URL of `url`'s database for another user. */
export const urlAs = (url: string, user: string) => {
  const next = new URL(url)
  next.username = user
  return next.toString()
}

// The schema of each least-privileged database, by its application URL.
const schemas = new Map<string, PgSchema.PgSchema>()

/** The schema of a backend's database (public unless a least-privileged backend made it). */
export const schemaOf = (url: string): PgSchema.PgSchema => schemas.get(url) ?? PgSchema.publicSchema

/** Makes `url`'s database (made by the administrator) one with `schema` owned, migrated and granted as `pgBackend` says. */
const leastPrivileged = async (
  url: string,
  name: string,
  roles: { readonly owner: string; readonly app: string }
): Promise<void> => {
  const schema = PgSchema.make(name)
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  try {
    await admin.query(`CREATE SCHEMA ${schema.quoted} AUTHORIZATION ${roles.owner}`)
  } finally {
    await admin.end()
  }
  const ownerUrl = urlAs(url, roles.owner)
  await Effect.runPromise(Effect.scoped(Layer.build(Database.layer(ownerUrl, { schema: name }))))
  const owner = new pg.Client({ connectionString: ownerUrl })
  await owner.connect()
  try {
    for (const statement of Grants.statements(schema, `"${roles.app}"`)) await owner.query(statement)
  } finally {
    await owner.end()
  }
}

/** A Database layer for a backend's database: its schema given (Docket migrates unless told not to). */
export const databaseLayer = (url: string, options: Database.Options = {}) =>
  Database.layer(url, { schema: schemaOf(url).name, ...options })

/** The SqlClient (migrated) and QueueRepo over a database URL. */
/** A raw `pg` session of a test's own on `url` (named `applicationName` in pg_stat_activity), ended with the scope. */
export const pgSession = (url: string, applicationName?: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url, application_name: applicationName })
      // A session the server ends (the database dropped WITH (FORCE) after
      // the test) reports it as an 'error' event: its next query fails instead.
      client.on("error", () => {})
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end())
  )

export const repoLayer = (url: string, options: QueueRepo.Options = {}) =>
  QueueRepo.layer(options).pipe(Layer.provideMerge(databaseLayer(url)))

/**
 * `sql.unsafe` of the SqlClient in context with Docket's objects and channels
 * named as Docket names them there: qualified by the schema of the Database
 * layer in context (none on SQLite and in public).
 */
export const unsafe = <A extends object = Record<string, unknown>>(text: string, params?: ReadonlyArray<unknown>) =>
  Effect.flatMap(
    Effect.zip(SqlClient.SqlClient, PgSchema.current),
    ([sql, schema]) => sql.unsafe<A>(schema.qualify(text), params)
  )

/**
 * Runs a statement as the administrator on the PostgreSQL database in
 * context, on a session of its own whose search_path is the schema of the
 * Database layer in context (so names need no qualifying, and a RENAME TO
 * stays bare): DDL a test needs (dropping a table, a trigger, a clock
 * function) that a least-privileged role may not run.
 */
export const asAdmin = (text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.gen(function*() {
    const [{ db }] = yield* unsafe<{ db: string }>("SELECT current_database() AS db")
    const schema = yield* PgSchema.current
    yield* Effect.promise(async () => {
      const client = new pg.Client({ connectionString: urlFor(db) })
      await client.connect()
      try {
        await client.query(`SET search_path TO ${schema.quoted}`)
        await client.query(text, [...params])
      } finally {
        await client.end()
      }
    })
  })

/** DDL a test needs, on either dialect: as the administrator on PostgreSQL (`asAdmin`), on SQLite as it is. */
export const ddl = (text: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => asAdmin(text),
      orElse: () => Effect.asVoid(sql.unsafe(text))
    }))

/**
 * The tables items are stored in: on PostgreSQL done items are in docket_done
 * (migrations/pg/0011_done_table.sql), every other item in docket_items.
 */
export const itemTables = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    // Before migration 0011 (the upgrade tests) there is no docket_done yet.
    pg: () =>
      Effect.flatMap(PgSchema.current, (schema) =>
        Effect.map(
          sql.unsafe<{ done: string | null }>("SELECT to_regclass($1)::text AS done", [schema.object("docket_done")]),
          (rows) => rows[0].done === null ? ["docket_items"] : ["docket_items", "docket_done"]
        )),
    orElse: () => Effect.succeed(["docket_items"])
  }))

/** Sets columns of an item directly (tests move time by editing rows, never by sleeping), in whichever table holds it. */
export const setRow = (id: number, set: Record<string, number | string | null>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = Object.keys(set)
    const marks = sql.onDialectOrElse({ pg: () => (i: number) => `$${i + 1}`, orElse: () => (_: number) => "?" })
    for (const table of yield* itemTables) {
      const text = `UPDATE ${table} SET ${columns.map((c, i) => `${c} = ${marks(i)}`).join(", ")} WHERE id = ${
        marks(columns.length)
      }`
      yield* unsafe(text, [...columns.map((c) => set[c]), id])
    }
  })

/** Moves every finished item's finish time `ms` into the past (in both tables on PostgreSQL). */
export const ageFinished = (ms: number) =>
  Effect.gen(function*() {
    for (const table of yield* itemTables) {
      yield* unsafe(`UPDATE ${table} SET finished_at = finished_at - ${Math.trunc(ms)} WHERE finished_at IS NOT NULL`)
    }
  })

/**
 * Makes an item's lease run out now: its end is set to the current
 * millisecond, once the clock has passed the millisecond this was called in.
 * Not to 0: a lease's end only moves forward while the item runs, and a
 * PostgreSQL claim reads only the leases that ended after its worker's last
 * claim (src/internal/sql/claimCursors.ts), so an end moved back before that
 * claim would be found by the next full walk only, as it would be in
 * production if a lease could end in the past.
 */
export const expireLease = (id: number) =>
  Effect.gen(function*() {
    const called = Date.now()
    while (Date.now() <= called) yield* Effect.sleep("1 millis")
    yield* setRow(id, { lease_until: Date.now() })
  })

/** Makes a scheduled item due now. */
export const makeDue = (id: number) => setRow(id, { run_at: 0 })

/** Counts rows of the queue table in a state. */
export const countState = (state: "waiting" | "running" | "done" | "dead" | "cancelled") =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    unsafe<{ n: number | string }>(
      sql.onDialectOrElse({
        pg: () => `SELECT count(*) AS n FROM docket_items_all WHERE state = $1`,
        orElse: () => `SELECT count(*) AS n FROM docket_items_all WHERE state = ?`
      }),
      [state]
    )).pipe(Effect.map((rows) => Number(rows[0].n)))

/** Counts every row of the queue table. */
export const countAll = unsafe<{ n: number | string }>(`SELECT count(*) AS n FROM docket_items_all`).pipe(
  Effect.map((rows) => Number(rows[0].n))
)
