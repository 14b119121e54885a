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
import * as QueueRepo from "../../src/QueueRepo.js"

export const PG_ADMIN_URL = process.env.DOCKET_TEST_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"
export const IN_CI = process.env.CI === "true" || process.env.CI === "1"

const withAdmin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 5000 })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

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

/** Makes a fresh database; returns its URL and a function that drops it. */
export const freshPgDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  const name = `docket_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}`))
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

export const pgBackend = (): Backend => {
  const made: Array<() => Promise<void>> = []
  return {
    name: "pg",
    fresh: async () => {
      const db = await freshPgDatabase()
      made.push(db.drop)
      return db.url
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
    }
  }
}

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
  QueueRepo.layer(options).pipe(Layer.provideMerge(Database.layer(url)))

/**
 * The tables items are stored in: on PostgreSQL done items are in docket_done
 * (migrations/pg/0011_done_table.sql), every other item in docket_items.
 */
export const itemTables = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    // Before migration 0011 (the upgrade tests) there is no docket_done yet.
    pg: () =>
      Effect.map(
        sql.unsafe<{ done: string | null }>("SELECT to_regclass('docket_done')::text AS done"),
        (rows) => rows[0].done === null ? ["docket_items"] : ["docket_items", "docket_done"]
      ),
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
      yield* sql.unsafe(text, [...columns.map((c) => set[c]), id])
    }
  })

/** Moves every finished item's finish time `ms` into the past (in both tables on PostgreSQL). */
export const ageFinished = (ms: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const table of yield* itemTables) {
      yield* sql.unsafe(`UPDATE ${table} SET finished_at = finished_at - ${Math.trunc(ms)} WHERE finished_at IS NOT NULL`)
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
    sql.unsafe<{ n: number | string }>(
      sql.onDialectOrElse({
        pg: () => `SELECT count(*) AS n FROM docket_items_all WHERE state = $1`,
        orElse: () => `SELECT count(*) AS n FROM docket_items_all WHERE state = ?`
      }),
      [state]
    )).pipe(Effect.map((rows) => Number(rows[0].n)))

/** Counts every row of the queue table. */
export const countAll = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe<{ n: number | string }>(`SELECT count(*) AS n FROM docket_items_all`)).pipe(
    Effect.map((rows) => Number(rows[0].n))
  )
