/**
 * PostgreSQL only: claims while another session holds vacuum back (issue 35;
 * migrations/pg/0015_claim_cursor.sql, src/internal/sql/claimCursors.ts).
 *
 * Counted, not timed: the claim function reports the index entries each claim
 * read (the claim and lease indexes, from its transaction's own statistics),
 * and the store counts them by walk in the `docket_claims` and
 * `docket_claim_index_entries` metrics. With a REPEATABLE READ snapshot held
 * open, every claimed item leaves a dead entry no scan may skip: a full walk
 * reads all of them, a claim from the cursors does not. The fenced statements
 * (src/internal/sql/held.ts) are checked by their plans in the same situation,
 * with statistics that call the table empty.
 * Registered by test/store/pg.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Metric } from "effect"
import type pg from "pg"
import type { Claim } from "../../../src/Domain.js"
import * as Complete from "../../../src/internal/sql/claimComplete.js"
import * as Extend from "../../../src/internal/sql/claimExtend.js"
import * as Fail from "../../../src/internal/sql/claimFail.js"
import * as Release from "../../../src/internal/sql/claimRelease.js"
import * as Snooze from "../../../src/internal/sql/claimSnooze.js"
import { intArray } from "../../../src/internal/sql/db.js"
import { FULL_EVERY_MAX_MS, walkMetrics, WASTED_ENTRIES } from "../../../src/internal/sql/claimCursors.js"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { asAdmin, type Backend, expireLease, pgSession, repoLayer, schemaOf, unsafe } from "../../support/db.js"

/** Items a round enqueues and drains. */
const ROUND = 4000
/** Items a claim asks for. */
const BATCH = 50

const counter = (metric: Metric.Metric.Counter<number>) => Effect.map(Metric.value(metric), (state) => Number(state.count))
const full = walkMetrics("full")
const cursor = walkMetrics("cursor")

/** The claims and index entries so far, by walk (process-wide counters: take differences). */
const counts = Effect.all({
  full: counter(full.claims),
  fullEntries: counter(full.entries),
  cursor: counter(cursor.claims),
  cursorEntries: counter(cursor.entries)
})
type Counts = Effect.Effect.Success<typeof counts>
const since = (before: Counts, after: Counts): Counts => ({
  full: after.full - before.full,
  fullEntries: after.fullEntries - before.fullEntries,
  cursor: after.cursor - before.cursor,
  cursorEntries: after.cursorEntries - before.cursorEntries
})

/** Opens a REPEATABLE READ transaction on `session` that has taken its snapshot (its backend_xmin is set). */
const holdSnapshot = (session: pg.Client, url: string) =>
  Effect.promise(async () => {
    await session.query("BEGIN ISOLATION LEVEL REPEATABLE READ")
    await session.query(schemaOf(url).qualify("SELECT count(*) FROM docket_items"))
  })

/** Claims and completes until a claim comes back empty; the ids in the order claimed. */
const drain = (repo: QueueRepo.Service) =>
  Effect.gen(function*() {
    const ids: Array<number> = []
    for (;;) {
      const claims: ReadonlyArray<Claim> = yield* repo.claim({ worker: "w", limit: BATCH, lease: 60_000 })
      if (claims.length === 0) return ids
      ids.push(...claims.map((c) => c.id))
      expect(yield* repo.completeMany(claims)).toEqual(claims.map(() => true))
    }
  })

const enqueueRound = (repo: QueueRepo.Service) =>
  repo.enqueueMany(Array.from({ length: ROUND }, (_, i) => ({ kind: "job", payload: i })))

/** A fresh database, its repo, and a session of its own holding a snapshot. */
const heldQueue = (backend: Backend) =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(() => backend.fresh())
    const context = yield* Layer.build(repoLayer(url))
    const repo = Context.get(context, QueueRepo.QueueRepo)
    const holder = yield* pgSession(url, "docket-test-holder")
    yield* holdSnapshot(holder, url)
    const { rows } = yield* Effect.promise(() =>
      holder.query<{ held: boolean }>(
        "SELECT backend_xmin IS NOT NULL AS held FROM pg_stat_activity WHERE application_name = 'docket-test-holder'"
      )
    )
    expect(rows).toEqual([{ held: true }])
    return { repo, holder, context }
  })

/** Registers these tests for the PostgreSQL backend. */
export const pgHeldHorizonTests = (backend: Backend) => {
  it.live("with a snapshot held: claims go on from cursors once a full walk meets the dead entries, and a cursor claim reads as many entries in round 6 as in round 3; a full walk reads them all, about once a second", () =>
    Effect.gen(function*() {
      const { repo } = yield* heldQueue(backend)
      const rounds: Array<Counts & { readonly ids: ReadonlyArray<number>; readonly ms: number }> = []
      for (let round = 1; round <= 6; round++) {
        yield* enqueueRound(repo)
        const before = yield* counts
        const startedAt = Date.now()
        const ids = yield* drain(repo)
        rounds.push({ ...since(before, yield* counts), ids, ms: Date.now() - startedAt })
      }
      // Every item once, in claim order (one priority, each due at its enqueue: by id).
      const all = rounds.flatMap((r) => r.ids)
      expect(new Set(all).size).toBe(6 * ROUND)
      expect(all).toEqual([...all].sort((a, b) => a - b))
      const perCursorClaim = (r: Counts) => r.cursorEntries / r.cursor
      const perFullWalk = (r: Counts) => r.fullEntries / r.full
      const report = rounds.map((r, i) =>
        `round ${i + 1}: ${r.ms} ms, ${r.full} full walks (${perFullWalk(r).toFixed(0)} entries each), ` +
        `${r.cursor} cursor claims (${perCursorClaim(r).toFixed(1)} entries each)`
      ).join("\n")
      console.log(`HELD HORIZON (${ROUND} items a round, batches of ${BATCH}):\n${report}`)
      for (const r of rounds.slice(2)) {
        // Past WASTED_ENTRIES dead entries, the claims are cursor claims, but
        // for a full walk about once a second.
        expect(r.cursor, report).toBeGreaterThan(r.full)
        expect(r.full, report).toBeLessThanOrEqual(Math.ceil(r.ms / 1000) + 1)
      }
      // A cursor claim does not read the dead entries behind it: about the batch.
      expect(perCursorClaim(rounds[5]), report).toBeLessThanOrEqual(perCursorClaim(rounds[2]) * 1.3 + 20)
      expect(perCursorClaim(rounds[5]), report).toBeLessThan(4 * BATCH)
      // The control: the next full walk (claims on the drained queue until one
      // comes, at most FULL_EVERY_MAX_MS) reads every dead entry of the six rounds.
      const startedAt = Date.now()
      let walk: Counts | undefined
      while (walk === undefined && Date.now() - startedAt < FULL_EVERY_MAX_MS + 5_000) {
        const before = yield* counts
        expect(yield* repo.claim({ worker: "w", limit: BATCH, lease: 60_000 })).toEqual([])
        const one = since(before, yield* counts)
        if (one.full === 1) walk = one
        else yield* Effect.sleep("20 millis")
      }
      expect(walk?.fullEntries, report).toBeGreaterThanOrEqual(6 * ROUND)
    }).pipe(Effect.scoped, Effect.timeout("150 seconds")))

  it.live("with a snapshot held and claims on cursors: an item that lands behind them is claimed by the next full walk; a lease that ends is claimed by the next cursor claim", () =>
    Effect.gen(function*() {
      const { context, repo } = yield* heldQueue(backend)
      for (let round = 0; round < 2; round++) {
        yield* enqueueRound(repo)
        yield* drain(repo)
      }
      expect(2 * ROUND).toBeGreaterThan(WASTED_ENTRIES)
      // Claims are on cursors now. A full walk still comes about once a
      // second, so a step meant to show a cursor claim is tried again when a
      // full walk happened to fall on it (at most a few times).
      const claimOne = Effect.gen(function*() {
        const before = yield* counts
        const claims = yield* repo.claim({ worker: "w", limit: 1, lease: 60_000 })
        return { claims, walk: since(before, yield* counts).full === 1 ? "full" as const : "cursor" as const }
      })
      let expiredTakenBack = false
      for (let attempt = 0; attempt < 5 && !expiredTakenBack; attempt++) {
        const [fresh] = yield* repo.enqueueMany([{ kind: "job", payload: "fresh" }])
        const first = yield* claimOne
        expect(first.claims.map((c) => c.id)).toEqual([fresh.id])
        // Its lease ends: the next claim takes it back, from the cursors.
        yield* Effect.provide(expireLease(fresh.id), context)
        const second = yield* claimOne
        expect(second.claims.map((c) => c.id)).toEqual([fresh.id])
        expect(yield* repo.complete(second.claims[0])).toBe(true)
        expiredTakenBack = first.walk === "cursor" && second.walk === "cursor"
      }
      expect(expiredTakenBack).toBe(true)

      // An item due an hour ago lands behind the cursor (as a late commit or
      // a release would); a second item lands ahead of it.
      const [late] = yield* repo.enqueueMany([{ kind: "job", payload: "late", runAt: Date.now() - 3_600_000 }])
      const [ahead] = yield* repo.enqueueMany([{ kind: "job", payload: "ahead" }])
      const landedAt = Date.now()
      const taken: Array<{ readonly id: number; readonly walk: "full" | "cursor" }> = []
      while (taken.length < 2 && Date.now() - landedAt < FULL_EVERY_MAX_MS + 5_000) {
        const { claims, walk } = yield* claimOne
        for (const c of claims) {
          taken.push({ id: c.id, walk })
          expect(yield* repo.complete(c)).toBe(true)
        }
        if (claims.length === 0) yield* Effect.sleep("20 millis")
      }
      // Both are claimed, the late one by a full walk only (a cursor claim
      // passes it by), within the longest interval between full walks.
      expect(taken.map((t) => t.id).sort((x, y) => x - y)).toEqual([late.id, ahead.id])
      expect(taken.find((t) => t.id === late.id)?.walk).toBe("full")
      expect(Date.now() - landedAt).toBeLessThan(FULL_EVERY_MAX_MS + 5_000)
    }).pipe(Effect.scoped, Effect.timeout("60 seconds")))

  it.live("with no snapshot held claims are full walks that read little beyond their batch, and a full walk that meets no dead entries ends cursor claims", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const context = yield* Layer.build(repoLayer(url))
      const repo = Context.get(context, QueueRepo.QueueRepo)
      const before = yield* counts
      for (let round = 0; round < 3; round++) {
        yield* enqueueRound(repo)
        expect(yield* drain(repo)).toHaveLength(ROUND)
      }
      const walks = since(before, yield* counts)
      // Each full walk reads its batch and the entries the claims just before
      // it left (dead, not yet marked). A snapshot held for a moment by another
      // session, even of another database (a concurrent test file: its
      // snapshot holds back the bound a scan uses to decide an entry is dead
      // until that bound is recomputed), can send a few claims to cursors for
      // a second; the log says how many.
      console.log(`NO HOLD: ${JSON.stringify(walks)}`)
      expect(walks.full).toBeGreaterThan(0)
      expect(walks.fullEntries / walks.full).toBeLessThan(20 * BATCH)
      // Once a full walk reads little, the claims after it are full walks too.
      let settled = false
      for (let attempt = 0; attempt < 100 && !settled; attempt++) {
        const b = yield* counts
        yield* repo.claim({ worker: "w", limit: BATCH, lease: 60_000 })
        const one = since(b, yield* counts)
        settled = one.full === 1 && one.fullEntries < WASTED_ENTRIES
        if (!settled) yield* Effect.sleep("50 millis")
      }
      expect(settled).toBe(true)
      const b = yield* counts
      for (let i = 0; i < 3; i++) yield* repo.claim({ worker: "w", limit: BATCH, lease: 60_000 })
      expect(since(b, yield* counts)).toMatchObject({ full: 3, cursor: 0 })
    }).pipe(Effect.scoped, Effect.timeout("60 seconds")))

  // src/internal/sql/held.ts: the fenced statements find their rows by
  // primary key probes whatever the statistics say. Here they say "no rows"
  // (analysed after a drain, the dead rows kept by the snapshot), where a join
  // of the batch read a whole index (issue 35); the token lookup (issue 34)
  // must not change the plan.
  it.live("with a snapshot held and statistics that say the table is empty: each fenced statement reads docket_items by its primary key only, with no join", () =>
    Effect.gen(function*() {
      const { context, repo } = yield* heldQueue(backend)
      const admin = (text: string) => Effect.provide(asAdmin(text), context)
      yield* admin("ALTER TABLE docket_items SET (autovacuum_enabled = false)")
      // 10,000 items run and gone (dead rows the snapshot keeps), analysed;
      // then 10,000 waiting and a batch of 50 running: a table a sequential
      // scan would read whole, and statistics that call it empty.
      const many = Array.from({ length: 10_000 }, (_, i) => ({ kind: "job", payload: i }))
      yield* repo.enqueueMany(many)
      for (;;) {
        const batch = yield* repo.claim({ worker: "w", limit: 3000, lease: 60_000 })
        if (batch.length === 0) break
        yield* repo.completeMany(batch)
      }
      yield* admin("ANALYZE docket_items")
      yield* repo.enqueueMany(many)
      const claims = yield* repo.claim({ worker: "w", limit: BATCH, lease: 60_000 })
      expect(claims).toHaveLength(BATCH)
      const ids = intArray(claims.map((c) => c.id))
      const tokens = intArray(claims.map((c) => c.token))
      const delays = intArray(claims.map(() => 1000))
      const statements: ReadonlyArray<readonly [string, string, ReadonlyArray<unknown>, boolean]> = [
        ["complete (kept)", Complete.pgKeep, [ids, tokens, null], true],
        ["complete (deleted)", Complete.pgDelete, [ids, tokens], true],
        ["extend", Extend.pg, [ids, tokens, 60_000], true],
        ["release", Release.pg, [ids, tokens], false],
        ["snooze", Snooze.pg, [ids, tokens, delays], false],
        ["fail", Fail.pg, [ids, tokens, claims.map(() => "x"), delays, `{${claims.map(() => "f").join(",")}}`], false]
      ]
      const explain = (text: string, params: ReadonlyArray<unknown> = []) =>
        Effect.provide(unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params), context).pipe(
          Effect.map((rows) => rows.map((r) => r["QUERY PLAN"]).join("\n"))
        )
      const estimate = Number(/rows=(\d+)/.exec(yield* explain("SELECT 1 FROM docket_items"))?.[1])
      // The situation is as meant: the planner believes docket_items nearly empty.
      expect(estimate).toBeLessThan(100)
      for (const [name, text, params, alone] of statements) {
        const plan = yield* explain(text, params)
        expect(plan, name).toMatch(/docket_items_pkey/)
        expect(plan, name).not.toMatch(/Seq Scan on docket_items |docket_items_lease|docket_items_claim/)
        // Complete and extend read only the batch's rows: nothing to join. (The
        // others also probe the waiting twins' key and count retries.)
        if (alone) expect(plan, name).not.toMatch(/Join|Nested Loop/)
      }
    }).pipe(Effect.scoped, Effect.timeout("60 seconds")))
}
