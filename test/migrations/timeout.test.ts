/**
 * The migrations run without the pool's client-side statement timeout
 * (src/Database.ts): a backfill or an index build on a large table may rightly
 * take minutes, and cutting it off would leave the database unmigrated. The
 * statements after the migrations are bounded again.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Database from "../../src/Database.js"
import { freshPgDatabase, pgAvailable } from "../support/db.js"

const cleanups: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

describe.skipIf(!pgAvailable)("migrations and the client-side statement timeout (PostgreSQL)", () => {
  it("a migration statement waiting three times the bound completes; a statement after the migrations is cut off", async () => {
    const db = await freshPgDatabase()
    cleanups.push(db.drop)
    // A slow migration stands in for a backfill on a large table: another
    // session creates the migrations table in a transaction it keeps open, so
    // the migrator's CREATE TABLE IF NOT EXISTS waits for it.
    const { default: Pg } = await import("pg")
    const blocker = new Pg.Client({ connectionString: db.url })
    await blocker.connect()
    cleanups.push(() => blocker.end())
    await blocker.query("BEGIN")
    await blocker.query("CREATE TABLE docket_migrations (held int)")
    // Watched from a session of its own: inside a transaction pg_stat_activity
    // is a snapshot taken at its first read.
    const observer = new Pg.Client({ connectionString: db.url })
    await observer.connect()
    cleanups.push(() => observer.end())
    const runtime = ManagedRuntime.make(
      Database.layer(db.url, { statementTimeout: "300 millis", applicationName: "docket-migrate-test" }) as Layer.Layer<
        SqlClient.SqlClient
      >
    )
    cleanups.push(() => runtime.dispose())
    const migrated = runtime.runPromise(Effect.either(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("SELECT 1 AS one"))))
    // Wait until the migrator's statement has waited three times the bound (a
    // bounded one would have been cut off at 300 ms and never get there).
    const deadline = performance.now() + 20_000
    for (;;) {
      const { rows } = await observer.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE application_name = 'docket-migrate-test' AND wait_event_type = 'Lock'
           AND now() - query_start > interval '900 milliseconds'`
      )
      if (rows[0].n > 0) break
      if (performance.now() > deadline) throw new Error("the migration never waited 900 ms on the held table")
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await blocker.query("ROLLBACK")
    expect(Either.isRight(await migrated)).toBe(true)
    const sleep = await runtime.runPromise(
      Effect.either(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("SELECT pg_sleep(1)")))
    )
    expect(Either.isLeft(sleep)).toBe(true)
    if (Either.isLeft(sleep)) expect(String(sleep.left.cause)).toMatch(/statement timed out after 300 ms/)
  }, 30_000)
})
