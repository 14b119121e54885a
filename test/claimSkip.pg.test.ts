/**
 * The claim does not walk the waiting items not yet due
 * (migrations/pg/0013_claim_skip_scan.sql): an empty claim over 20,000 items
 * due in an hour reads a few blocks of docket_items_claim, where a walk of
 * the index in claim order reads all of them. Counted, not timed: the
 * index's blocks fetched in this transaction (pg_stat_get_xact_blocks_fetched),
 * beside the same count for the walk the claim did before 0013.
 */
import { Effect, ManagedRuntime } from "effect"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import * as Docket from "../src/Docket.js"
import * as QueueRepo from "../src/QueueRepo.js"
import { freshPgDatabase, pgAvailable } from "./support/db.js"

const cleanups: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

/** A fresh database migrated by Docket; `session()` opens a plain pg session on it (all closed after the file). */
const freshQueue = async () => {
  const db = await freshPgDatabase()
  cleanups.push(db.drop)
  const runtime = ManagedRuntime.make(Docket.layerClient(db.url))
  cleanups.push(() => runtime.dispose())
  await runtime.runPromise(QueueRepo.QueueRepo)
  return {
    session: async () => {
      const client = new pg.Client({ connectionString: db.url })
      await client.connect()
      cleanups.push(() => client.end())
      return client
    }
  }
}

describe.skipIf(!pgAvailable)("the claim skips items not yet due (PostgreSQL)", () => {
  it("an empty claim reads a few blocks of the claim index, a walk of it all of them; a due item is still found", async () => {
    const client = await (await freshQueue()).session()
    await client.query(`
      INSERT INTO docket_items (kind, payload, priority, run_at, created_at, updated_at)
      SELECT 'later', '{}', g % 3, docket_now_ms() + 3600000 + g, docket_now_ms(), docket_now_ms()
      FROM generate_series(1, 20000) g`)
    await client.query("VACUUM ANALYZE docket_items")

    // The session's own count, not yet flushed to the shared statistics: it
    // holds earlier statements' fetches too (the INSERT above), so the
    // difference around the statements is what they read.
    const fetched = async () => {
      const { rows } = await client.query<{ n: string }>(
        "SELECT pg_stat_get_xact_blocks_fetched('docket_items_claim'::regclass) AS n")
      return Number(rows[0].n)
    }
    const blocksIn = async (statement: string, times: number) => {
      await client.query("BEGIN")
      try {
        const before = await fetched()
        for (let i = 0; i < times; i++) await client.query(statement)
        return ((await fetched()) - before) / times
      } finally {
        await client.query("ROLLBACK")
      }
    }
    // Eight claims: the first five planned each time, then PL/pgSQL's generic plan.
    const claim = "SELECT * FROM docket_claim('w', 10, 60000, NULL, 10)"
    const perClaim = await blocksIn(claim, 8)
    const perWalk = await blocksIn(
      `SELECT id FROM docket_items WHERE state = 'waiting' AND run_at <= docket_now_ms()
       ORDER BY priority DESC, run_at, id LIMIT 10`, 1)
    expect(perWalk).toBeGreaterThan(40)
    expect(perClaim).toBeLessThan(15)

    // A due item of the lowest priority, behind every item not yet due of the higher ones, is claimed.
    const { rows: [due] } = await client.query<{ id: string }>(`
      INSERT INTO docket_items (kind, payload, priority, run_at, created_at, updated_at)
      VALUES ('now', '{}', -1, docket_now_ms(), docket_now_ms(), docket_now_ms()) RETURNING id`)
    const { rows: claimed } = await client.query<{ id: string }>(claim)
    expect(claimed.map((r) => r.id)).toEqual([due.id])
  })

  it("a batch cut inside a priority takes the first items in claim order and locks no other row", async () => {
    const queue = await freshQueue()
    const claimer = await queue.session()
    const other = await queue.session()
    // Three priorities, 4 due items each, and items not yet due in each. A
    // higher priority has later run-afters and larger ids than a lower one, so
    // an order other than claim order (by id, by run-after) takes another set.
    const { rows } = await claimer.query<{ id: string; priority: number }>(`
      INSERT INTO docket_items (kind, payload, priority, run_at, created_at, updated_at)
      SELECT 'k', '{}', p, docket_now_ms() - 600000 + p * 1000 + g, docket_now_ms(), docket_now_ms()
      FROM generate_series(0, 2) p, generate_series(1, 4) g ORDER BY p, g
      RETURNING id, priority`)
    await claimer.query(`
      INSERT INTO docket_items (kind, payload, priority, run_at, created_at, updated_at)
      SELECT 'k', '{}', p, docket_now_ms() + 3600000, docket_now_ms(), docket_now_ms() FROM generate_series(0, 2) p`)
    const inClaimOrder = [...rows].sort((a, b) => b.priority - a.priority || Number(a.id) - Number(b.id)).map((r) => r.id)
    await claimer.query("BEGIN")
    try {
      const { rows: claimed } = await claimer.query<{ id: string }>("SELECT id FROM docket_claim('w', 6, 60000, NULL, 6)")
      expect(claimed.map((r) => r.id).sort((a, b) => Number(a) - Number(b))).toEqual(
        inClaimOrder.slice(0, 6).sort((a, b) => Number(a) - Number(b)))
      // While the claim's transaction is open, every other waiting row can be locked by another session.
      const { rows: [free] } = await other.query<{ n: string }>(
        "SELECT count(*) AS n FROM (SELECT id FROM docket_items WHERE state = 'waiting' FOR UPDATE SKIP LOCKED) x")
      expect(Number(free.n)).toBe(12 + 3 - 6)
    } finally {
      await claimer.query("ROLLBACK")
    }
  })
})
