/**
 * Transactional handlers under kills (issue 36: an actor's state changes
 * with its message, atomically), on PostgreSQL and on a SQLite file shared
 * by the processes: 2,000 items of a `transactional` handler that adds one
 * to a counter row and records its application in a row naming the item
 * (test/fixtures/reliability/transactional/worker.ts), three worker
 * processes, a random one SIGKILLed and replaced every second until every
 * item is done.
 *
 * At the end: the counter equals the number of items exactly, and each item
 * was applied once (one application row each): a run a kill cut short, or
 * whose lease was lost, left none of its writes. The figures give how many
 * runs were cut short (attempts beyond the first).
 */
import { Effect, ManagedRuntime } from "effect"
import { describe, expect, it } from "vitest"
import * as Docket from "../../src/Docket.js"
import { pgAvailable } from "../support/db.js"
import { Apply } from "../fixtures/reliability/transactional/handler.js"
import { countOf, Crew, scenarioStore } from "./killLoop.js"
import { fixture, report, scaled } from "./support.js"

const TABLES = `
CREATE TABLE tx_counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
INSERT INTO tx_counter (id, n) VALUES (1, 0);
CREATE TABLE tx_applied (item BIGINT NOT NULL, pid INTEGER NOT NULL);`

const scenario = (dialect: "pg" | "sqlite") =>
  it(`2,000 transactional items while a worker is SIGKILLed every second: the counter equals the items exactly (${dialect})`, async () => {
    const items = scaled(2000, 200)
    const store = await scenarioStore(dialect, "txkill")
    const client = ManagedRuntime.make(Docket.layerClient(store.url))
    const crew = new Crew({ database: store.url, tasks: "", script: fixture("transactional", "worker.ts") })
    try {
      await client.runPromise(Effect.void) // migrates
      await store.exec(TABLES)
      // The workers first, then the items: enqueued before, they were drained by the first worker
      // up while the others loaded, before the first kill (a quiet machine's rehearsal: 0 kills).
      await crew.start(3)
      const started = performance.now()
      await client.runPromise(
        Docket.client(Apply).enqueueMany(Array.from({ length: items }, (_, i) => ({ payload: { n: i + 1 } })))
      )
      await crew.killEverySecondUntil(
        "every transactional item done",
        async () => (await countOf(store, "SELECT count(*) AS n FROM docket_items_all WHERE state = 'done'")) === items,
        240_000
      )
      const drainedMs = performance.now() - started
      for (const exit of await crew.stopLive()) expect(exit).toEqual({ code: 0, signal: null })

      const counter = Number((await store.rows<{ n: number | string }>("SELECT n FROM tx_counter WHERE id = 1"))[0].n)
      const applied = await countOf(store, "SELECT count(*) AS n FROM tx_applied")
      const distinct = await countOf(store, "SELECT count(DISTINCT item) AS n FROM tx_applied")
      const attempts = await countOf(store, "SELECT coalesce(sum(attempts), 0) AS n FROM docket_items_all")
      expect(counter).toBe(items)
      expect(applied).toBe(items)
      expect(distinct).toBe(items)
      expect(crew.kills).toBeGreaterThan(0)
      report(`transactional kill (${dialect})`, {
        items,
        kills: crew.kills,
        workers: crew.every.length,
        counter,
        runsCutShort: attempts - items,
        drainedS: Math.round(drainedMs / 100) / 10
      })
    } finally {
      await crew.killAll()
      await client.dispose()
      await store.close()
    }
  }, 300_000)

export const transactionalKillScenario = () => {
  describe.skipIf(!pgAvailable)("transactional handlers under kills (PostgreSQL)", () => scenario("pg"))
  describe("transactional handlers under kills (SQLite, one file shared by the processes)", () => scenario("sqlite"))
}
