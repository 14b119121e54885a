/**
 * PostgreSQL only, the claim.
 *
 * Claimers racing on separate pools never share an item; leases and due times
 * come from the database's clock.
 *
 * The claim does not walk the waiting items not yet due
 * (migrations/pg/0013_claim_skip_scan.sql): an empty claim over 20,000 items
 * due in an hour reads a few blocks of docket_items_claim, where a walk of
 * the index in claim order reads all of them. Counted, not timed: the
 * index's blocks fetched in this transaction (pg_stat_get_xact_blocks_fetched),
 * beside the same count for the walk the claim did before 0013.
 *
 * The claim is never JIT-compiled (migrations/pg/0010_claim_without_jit.sql):
 * with a big backlog the planner's estimate passes jit_above_cost and a
 * server with JIT would compile the claim on every execution (bench W6: over
 * a second per claim at 1M + 1M rows). Seen through auto_explain, whose plans
 * of the statements inside the claim functions come to this session as
 * notices: with every statement's cost above the JIT threshold (the session
 * sets it to 0), a plain query is compiled ("JIT:" in its plan) and the
 * claim's statements are not.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Context, Effect, ManagedRuntime } from "effect"
import pg from "pg"
import * as Docket from "../../../src/Docket.js"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { asAdmin, type Backend, freshPgDatabase, IN_CI, pgAvailable, unsafe } from "../../support/db.js"
import { SqlClient } from "@effect/sql"
import { dbNow, expectAround, withRepo } from "../../support/harness.js"
import { getItem } from "../../support/store.js"
import { pools } from "../../support/pg.js"

const cleanups: Array<() => Promise<void>> = []

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

/** Registers these tests for the PostgreSQL backend. */
export const pgClaimsTests = (backend: Backend) => {
  it.live("concurrent claimers on separate pools never share an item (1,000 items)", () =>
    Effect.scoped(Effect.gen(function*() {
      const contexts = yield* pools(backend, 2)
      const [a, b] = contexts.map((context) => Context.get(context, QueueRepo.QueueRepo))
      for (let batch = 0; batch < 4; batch++) {
        yield* a.enqueueMany(
          Array.from({ length: 250 }, (_, i) => ({ kind: "job", payload: batch * 250 + i, priority: i % 3 }))
        )
      }
      const drain = (repo: QueueRepo.Service, worker: string) =>
        Effect.gen(function*() {
          const ids: Array<number> = []
          for (;;) {
            const claims = yield* repo.claim({ worker, limit: 25, lease: "5 minutes" })
            if (claims.length === 0) return { worker, ids }
            for (const claim of claims) {
              expect(claim.worker).toBe(worker)
              expect(claim.attempt).toBe(1)
            }
            ids.push(...claims.map((c) => c.id))
          }
        })
      // Two claimers on each pool, all at once.
      const drained = yield* Effect.all(
        [drain(a, "a1"), drain(b, "b1"), drain(a, "a2"), drain(b, "b2")],
        { concurrency: "unbounded" }
      )
      const all = drained.flatMap((d) => d.ids)
      expect(all).toHaveLength(1_000)
      expect(new Set(all).size).toBe(1_000)
      // The stored claimant of every item is the claimer that got it.
      const rows = yield* Effect.provide(
        unsafe<{ id: string; claimed_by: string; attempts: number }>(
          "SELECT id, claimed_by, attempts FROM docket_items WHERE state = 'running'"
        ),
        contexts[0]
      )
      expect(rows).toHaveLength(1_000)
      const owner = new Map(drained.flatMap((d) => d.ids.map((id) => [id, d.worker] as const)))
      for (const row of rows) {
        expect(row.claimed_by).toBe(owner.get(Number(row.id)))
        expect(Number(row.attempts)).toBe(1)
      }
    })), 120_000)

  it.live("leases and due times come from the database's clock", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* QueueRepo.QueueRepo
      yield* repo.enqueue("job", {})
      const before = yield* dbNow
      const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute" })
      const after = yield* dbNow
      expectAround(claim.leaseUntil, before + 60_000, after + 60_000, 50)
    })))

  it.live("a worker clock skewed from the database's cannot matter: the database's clock decides", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* QueueRepo.QueueRepo
      // The database's clock runs an hour ahead of this process's clock.
      const skew = 3_600_000
      yield* asAdmin(`CREATE OR REPLACE FUNCTION docket_now_ms() RETURNS bigint
        LANGUAGE sql STABLE PARALLEL SAFE
        AS 'SELECT (extract(epoch FROM statement_timestamp()) * 1000)::bigint + ${skew}'`)
      const db = yield* dbNow
      expectAround(db, Date.now() + skew, Date.now() + skew, 5_000)

      // Due in 30 minutes by this process's clock, but already due by the database's.
      const early = yield* repo.enqueue("job", "early", { runAt: Date.now() + 1_800_000 })
      // A delay counts from the database's now.
      const t0 = yield* dbNow
      const delayed = yield* repo.enqueue("job", "delayed", { delay: "1 minute" })
      const t1 = yield* dbNow
      expectAround((yield* getItem(delayed.id)).runAt, t0 + 60_000, t1 + 60_000, 50)
      expect(yield* repo.stats).toMatchObject({ due: 1, scheduled: 1 })

      const before = yield* dbNow
      const claims = yield* repo.claim({ worker: "w", limit: 10, lease: "1 minute" })
      const after = yield* dbNow
      expect(claims.map((c) => c.id)).toEqual([early.id])
      expectAround(claims[0].leaseUntil, before + 60_000, after + 60_000, 50)
      expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 1, running: 1 })

      // Extend and a retry's backoff count from the database's now too.
      const e0 = yield* dbNow
      expect(yield* repo.extend(claims[0], "2 minutes")).toBe(true)
      const e1 = yield* dbNow
      expectAround((yield* getItem(early.id)).leaseUntil!, e0 + 120_000, e1 + 120_000, 50)
      const f0 = yield* dbNow
      expect(yield* repo.fail(claims[0], "x", { _tag: "Retry", delay: "3 minutes" })).toBe("retried")
      const f1 = yield* dbNow
      expectAround((yield* getItem(early.id)).runAt, f0 + 180_000, f1 + 180_000, 50)
    })))
}

const claimSkip = () =>
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
      // Eight claims: the first five planned each time, then PL/pgSQL's generic
      // plan. The claim a worker sends (a full walk: no cursors, no bound).
      const claim = "SELECT (item).id AS id FROM docket_claim_next('w', 10, 60000, NULL, 10, NULL, NULL, NULL, NULL) WHERE (item).id IS NOT NULL"
      const perClaim = await blocksIn(claim, 8)
      const perWalk = await blocksIn(
        `SELECT id FROM docket_items WHERE state = 'waiting' AND group_key IS NULL AND run_at <= docket_now_ms()
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
        const { rows: claimed } = await claimer.query<{ id: string }>(
          "SELECT (item).id AS id FROM docket_claim_next('w', 6, 60000, NULL, 6, NULL, NULL, NULL, NULL) WHERE (item).id IS NOT NULL")
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

const claimWithoutJit = () =>
  describe.skipIf(!pgAvailable)("the claim without JIT (PostgreSQL)", () => {
    it("the claim functions carry jit=off, and their statements are not compiled when every other one is", async () => {
      const db = await freshPgDatabase()
      cleanups.push(db.drop)
      const runtime = ManagedRuntime.make(Docket.layerClient(db.url))
      cleanups.push(() => runtime.dispose())
      await runtime.runPromise(
        Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueueMany([{ kind: "jit.probe", payload: { n: 1 } }, { kind: "jit.probe", payload: { n: 2 } }]))
      )
      const client = new pg.Client({ connectionString: db.url })
      await client.connect()
      cleanups.push(() => client.end())

      const { rows: config } = await client.query<{ proname: string; proconfig: Array<string> | null }>(
        `SELECT proname, proconfig FROM pg_proc
         WHERE proname IN ('docket_claim_from', 'docket_claim', 'docket_claim_next', 'docket_claim_after') AND pronargs >= 5
         ORDER BY proname`
      )
      expect(config.map((r) => [r.proname, r.proconfig?.includes("jit=off")])).toEqual([
        ["docket_claim", true],
        ["docket_claim_after", true],
        ["docket_claim_from", true],
        ["docket_claim_next", true]
      ])

      const { rows: [{ available }] } = await client.query<{ available: boolean }>("SELECT pg_jit_available() AS available")
      // Without LLVM in the server there is no JIT to turn off, and the plans
      // below cannot show it: CI's server has it (there this is a failure).
      if (!available) {
        expect(IN_CI, "this PostgreSQL has no JIT (pg_jit_available() is false): the plans cannot show it").toBe(false)
        console.warn("claimJit: this PostgreSQL has no JIT; only the functions' settings were checked")
        return
      }

      const notices: Array<string> = []
      client.on("notice", (notice) => notices.push(notice.message ?? ""))
      await client.query("LOAD 'auto_explain'")
      for (const set of [
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_nested_statements = on",
        "auto_explain.log_analyze = on",
        "auto_explain.log_level = notice",
        "jit = on",
        "jit_above_cost = 0"
      ]) await client.query(`SET ${set}`)

      // The control: a plain query is compiled under these settings.
      await client.query("SELECT count(*) FROM docket_items WHERE kind = 'jit.probe'")
      expect(notices.some((n) => /JIT:/.test(n)), notices.join("\n---\n")).toBe(true)

      notices.length = 0
      const { rows: claimed } = await client.query(
        `SELECT (item).id AS id FROM docket_claim_next($1::text, $2::int, $3::bigint, $4::text[], $5::int, NULL, NULL, NULL, NULL)
         WHERE (item).id IS NOT NULL`,
        ["jit-test", 10, 30_000, ["jit.probe"], 10]
      )
      expect(claimed).toHaveLength(2)
      // The plans of the claim's own statements (nested ones name the claim's CTEs).
      const inner = notices.filter((n) => /docket_items i/.test(n) && /Query Text/.test(n))
      expect(inner.length, notices.join("\n---\n")).toBeGreaterThan(0)
      for (const plan of inner) expect(plan).not.toMatch(/JIT:/)
    })
  })

/**
 * The claim's plan, each test on a database of its own (all dropped after the
 * file); registered at the top level of test/store/pg.test.ts.
 */
export const pgClaimPlanTests = () => {
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c()
  })
  claimSkip()
  claimWithoutJit()
}
