/**
 * The client-side statement timeout of Docket's PostgreSQL pool
 * (src/internal/statementTimeout.ts), through the reliability suite's TCP
 * proxy: in a partition a statement fails at the bound with an error that
 * says so, its connection is closed (not given back to hang the next
 * statement), and after the heal the pool serves statements again.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Database from "../src/Database.js"
import * as Docket from "../src/Docket.js"
import { DatabaseUnavailable, StorageError } from "../src/Errors.js"
import * as QueueRepo from "../src/QueueRepo.js"
import { startProxy } from "./reliability/proxy.js"
import { freshPgDatabase, pgAvailable } from "./support/db.js"

const cleanups: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

describe.skipIf(!pgAvailable)("the client-side statement timeout (PostgreSQL)", () => {
  it("a statement with no answer fails at the bound and its connection is closed; the pool recovers after the heal", async () => {
    const db = await freshPgDatabase()
    cleanups.push(db.drop)
    const target = new URL(db.url)
    const proxy = await startProxy({ host: target.hostname, port: Number(target.port || 5432) })
    cleanups.push(proxy.close)
    const runtime = ManagedRuntime.make(
      Database.layer(proxy.url(db.url), { migrate: false, statementTimeout: "600 millis", maxConnections: 2 }) as Layer.Layer<
        SqlClient.SqlClient
      >
    )
    cleanups.push(() => runtime.dispose())
    const select = (text: string) =>
      runtime.runPromise(Effect.either(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text))))
    expect(Either.isRight(await select("SELECT 1 AS one"))).toBe(true)
    const before = proxy.connections()

    proxy.partition()
    const started = performance.now()
    // On the pool's idle connection (a new one would wait for its connect timeout, 10 s).
    const silent = await select("SELECT 2")
    const tookMs = performance.now() - started
    expect(Either.isLeft(silent)).toBe(true)
    if (Either.isLeft(silent)) expect(String(silent.left.cause)).toMatch(/statement timed out after 600 ms/)
    expect(tookMs).toBeGreaterThanOrEqual(550)
    expect(tookMs).toBeLessThan(3000)

    proxy.heal()
    // Served again, on new connections (the timed-out ones were closed, not reused).
    expect(Either.isRight(await select("SELECT 3"))).toBe(true)
    expect(proxy.connections().accepted).toBeGreaterThan(before.accepted)
  }, 30_000)

  it("a claim hung on its reserved connection fails at the bound; the next claim, after the heal, is answered", async () => {
    const db = await freshPgDatabase()
    cleanups.push(db.drop)
    const target = new URL(db.url)
    const proxy = await startProxy({ host: target.hostname, port: Number(target.port || 5432) })
    cleanups.push(proxy.close)
    const runtime = ManagedRuntime.make(
      Docket.layerClient(proxy.url(db.url), { databaseOptions: { statementTimeout: "800 millis" } })
    )
    cleanups.push(() => runtime.dispose())
    const claim = runtime.runPromise(Effect.either(Effect.flatMap(QueueRepo.QueueRepo, (repo) =>
      repo.claim({ worker: "w", limit: 10, lease: "30 seconds" }))))
    // The first claim reserves the claim connection; nothing is due yet.
    const first = await claim
    expect(Either.isRight(first) && first.right).toEqual([])
    await runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue("k", { n: 1 })))

    proxy.partition()
    const started = performance.now()
    const hung = await runtime.runPromise(Effect.either(Effect.flatMap(QueueRepo.QueueRepo, (repo) =>
      repo.claim({ worker: "w", limit: 10, lease: "30 seconds" }))))
    const tookMs = performance.now() - started
    expect(Either.isLeft(hung)).toBe(true)
    if (Either.isLeft(hung)) expect(hung.left).toBeInstanceOf(StorageError)
    expect(tookMs).toBeLessThan(3000)

    proxy.heal()
    // The claim statement held in the partition reaches the server at the heal and
    // may have leased the item (nobody holds it: it is due again after its lease);
    // the claim connection was replaced, so claiming goes on.
    const after = await runtime.runPromise(Effect.either(Effect.flatMap(QueueRepo.QueueRepo, (repo) =>
      repo.claim({ worker: "w", limit: 10, lease: "30 seconds" }))))
    expect(Either.isRight(after)).toBe(true)
  }, 30_000)

  it('"infinity" lifts the bound (as documented); a value that is not a duration is a typed DatabaseUnavailable', async () => {
    const db = await freshPgDatabase()
    cleanups.push(db.drop)
    const unbounded = ManagedRuntime.make(
      Database.layer(db.url, { migrate: false, statementTimeout: "infinity" }) as Layer.Layer<SqlClient.SqlClient>
    )
    cleanups.push(() => unbounded.dispose())
    const slept = await unbounded.runPromise(Effect.either(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("SELECT pg_sleep(0.3)"))))
    expect(Either.isRight(slept)).toBe(true)
    const bad = await Effect.runPromise(Effect.either(Effect.scoped(Layer.build(
      Database.layer(db.url, { migrate: false, statementTimeout: "soon" as "infinity" })
    ))))
    expect(Either.isLeft(bad)).toBe(true)
    if (Either.isLeft(bad)) {
      expect(bad.left).toBeInstanceOf(DatabaseUnavailable)
      expect(bad.left.message).toMatch(/statementTimeout: "soon" is not a duration/)
    }
  }, 30_000)
})
