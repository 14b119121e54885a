/**
 * A provider's limits on Docket's role (src/internal/sessionLimits.ts):
 * `statement_timeout`, `idle_in_transaction_session_timeout` and
 * `idle_session_timeout` set low with `ALTER ROLE ... SET`, on a real
 * PostgreSQL. The worker lives on through idle gaps longer than the idle
 * limit (its LISTEN session kept, not reopened; no claim failed; woken by
 * notifications, with a poll of a minute), says so in one warning, waits
 * for another migrator's lock longer than the statement timeout, and retries
 * a claim the statement timeout cancelled.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Logger, ManagedRuntime, Schema } from "effect"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import * as Database from "../src/Database.js"
import * as Docket from "../src/Docket.js"
import * as Handler from "../src/Handler.js"
import { freshPgDatabase, pgAvailable, PG_ADMIN_URL, withClient } from "./support/db.js"

const cleanups: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

const admin = <A>(url: string, f: (client: pg.Client) => Promise<A>) => withClient(url, f)

/** A fresh database owned by a fresh role with the limits set on it; the role's URL. */
const limitedRole = async (limits: { statement: string; idleInTransaction: string; idleSession: string }) => {
  const db = await freshPgDatabase()
  const role = `docket_limits_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const database = new URL(db.url).pathname.slice(1)
  await admin(PG_ADMIN_URL, async (c) => {
    await c.query(`CREATE ROLE ${role} LOGIN`)
    await c.query(`ALTER DATABASE ${database} OWNER TO ${role}`)
    await c.query(`ALTER ROLE ${role} SET statement_timeout = '${limits.statement}'`)
    await c.query(`ALTER ROLE ${role} SET idle_in_transaction_session_timeout = '${limits.idleInTransaction}'`)
    await c.query(`ALTER ROLE ${role} SET idle_session_timeout = '${limits.idleSession}'`)
  })
  cleanups.push(async () => {
    await db.drop()
    await admin(PG_ADMIN_URL, (c) => c.query(`DROP ROLE IF EXISTS ${role}`))
  })
  const url = new URL(db.url)
  url.username = role
  url.password = ""
  return { url: url.toString(), adminUrl: db.url }
}

const Ping = Handler.make("limits.ping", { payload: Schema.Struct({ n: Schema.Number }), run: () => Effect.void })

/** A Docket layer (worker polling once a minute: only notifications wake it sooner) with its warnings collected. */
const start = (url: string, lines: Array<string>) => {
  const logger = Logger.make(({ logLevel, message }) => {
    if (logLevel.ordinal >= 30000) lines.push((Array.isArray(message) ? message : [message]).join(" "))
  })
  return ManagedRuntime.make(
    Docket.layer({ database: url, handlers: [Ping], concurrency: 4, poll: "1 minute" }).pipe(
      Layer.provide(Logger.replace(Logger.defaultLogger, logger))
    )
  )
}

const waitFor = async (what: string, done: () => Promise<boolean>, ms = 20_000) => {
  const deadline = Date.now() + ms
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const doneCount = (adminUrl: string) =>
  admin(adminUrl, async (c) =>
    Number((await c.query(`SELECT count(*) AS n FROM docket_done WHERE kind = 'limits.ping'`)).rows[0].n))

const listenPid = (adminUrl: string) =>
  admin(adminUrl, async (c) =>
    (await c.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'docket listen'`
    )).rows.map((row) => row.pid))

describe.skipIf(!pgAvailable)("a role with low session limits (PostgreSQL)", () => {
  it("idle gaps longer than idle_session_timeout: one warning, the LISTEN session kept, no claim failed, woken by notifications", async () => {
    const { adminUrl, url } = await limitedRole({ statement: "2s", idleInTransaction: "300ms", idleSession: "400ms" })
    const lines: Array<string> = []
    const runtime = start(url, lines)
    cleanups.push(() => runtime.dispose())
    const client = Docket.client(Ping)
    await runtime.runPromise(client.enqueue({ n: 0 }))
    await waitFor("the first item done", async () => (await doneCount(adminUrl)) === 1)
    const listening = await listenPid(adminUrl)
    expect(listening).toHaveLength(1)
    for (let round = 1; round <= 3; round++) {
      // Idle for three times the limit: every session Docket left idle would be ended.
      await new Promise((resolve) => setTimeout(resolve, 1200))
      await runtime.runPromise(client.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ payload: { n: round * 10 + i } }))))
      // Well inside the poll of a minute: only the notification wakes the worker.
      await waitFor(`round ${round} done`, async () => (await doneCount(adminUrl)) === 1 + round * 5, 15_000)
    }
    expect(await listenPid(adminUrl)).toEqual(listening)
    const limitWarnings = lines.filter((line) => line.includes("the server limits this role's sessions"))
    expect(limitWarnings).toHaveLength(1)
    expect(limitWarnings[0]).toContain("idle_session_timeout")
    expect(limitWarnings[0]).toContain("statement_timeout")
    expect(limitWarnings[0]).toContain("idle_in_transaction_session_timeout")
    expect(lines.filter((line) => /listen connection lost|claim failed/.test(line))).toEqual([])
  }, 60_000)

  it("statement_timeout: a migrator waits out another's lock longer than it; a claim it cancels is retried", async () => {
    const { adminUrl, url } = await limitedRole({ statement: "250ms", idleInTransaction: "0", idleSession: "0" })
    // Another migrator holds the migrations' lock for 1.5 s, six times the statement timeout.
    const holder = new pg.Client({ connectionString: adminUrl })
    holder.on("error", () => {})
    await holder.connect()
    cleanups.push(() => holder.end())
    await holder.query("BEGIN")
    await holder.query(`SELECT pg_advisory_xact_lock(hashtext('docket_migrations'))`)
    const released = new Promise<number>((resolve) =>
      setTimeout(() => void holder.query("COMMIT").then(() => resolve(Date.now())), 1500))
    const migrated = await Effect.runPromise(
      Effect.scoped(Effect.zipRight(Layer.build(Database.layer(url)), Effect.sync(() => Date.now())))
    )
    expect(migrated).toBeGreaterThanOrEqual(await released)

    const lines: Array<string> = []
    const runtime = start(url, lines)
    cleanups.push(() => runtime.dispose())
    const client = Docket.client(Ping)
    // Due in 1 s: the worker's claim then meets the table locked for 1.5 s.
    await runtime.runPromise(client.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ payload: { n: i }, delay: "1 second" }))))
    const locker = new pg.Client({ connectionString: adminUrl })
    locker.on("error", () => {})
    await locker.connect()
    cleanups.push(() => locker.end())
    await locker.query("BEGIN")
    await locker.query("LOCK TABLE docket_items IN ACCESS EXCLUSIVE MODE")
    await new Promise((resolve) => setTimeout(resolve, 2500))
    await locker.query("COMMIT")
    await waitFor("the items done after the lock", async () => (await doneCount(adminUrl)) === 3)
    expect(lines.some((line) => /claim failed.*statement timeout/.test(line))).toBe(true)
    expect(lines.some((line) => /claim works again/.test(line))).toBe(true)
    // The worker lived on: it still takes new items.
    await runtime.runPromise(client.enqueue({ n: 99 }))
    await waitFor("a new item done", async () => (await doneCount(adminUrl)) === 4)
    await runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`))
  }, 60_000)
})
