/**
 * PostgreSQL only: prunes that skip locked rows and walk the finished index, in racing pools.
 * Registered by test/store/pg.test.ts inside "QueueRepo on PostgreSQL > PostgreSQL only".
 */
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import pg from "pg"
import * as List from "../../../src/internal/sql/historyList.js"
import * as Prune from "../../../src/internal/sql/historyPrune.js"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { ageFinished, countState, repoLayer, schemaOf, unsafe } from "../../support/db.js"
import { pools } from "../../support/pg.js"
import type { Backend } from "../../support/db.js"

/** Registers these tests for the PostgreSQL backend. */
export const pgHistoryTests = (backend: Backend) => {
  it.live("a prune skips rows another session holds (never waits for them), takes them at a later pass, and walks the finished index", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const context = yield* Layer.build(repoLayer(url))
      const repo = Context.get(context, QueueRepo.QueueRepo)
      const sql = Context.get(context, SqlClient.SqlClient)
      yield* repo.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ kind: "old", payload: i })))
      yield* repo.completeMany(yield* repo.claim({ worker: "w", limit: 50, lease: 30_000 }))
      yield* ageFinished(172_800_000).pipe(Effect.provide(context))
      // Another session (another pruner) holds ten of them.
      const locker = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => locker.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => locker.end()))
      yield* Effect.promise(() => locker.query("BEGIN"))
      yield* Effect.promise(() => locker.query(schemaOf(url).qualify("SELECT id FROM docket_done ORDER BY id LIMIT 10 FOR UPDATE")))
      // Bounded well below a lock wait: the prune must not wait at all.
      expect(yield* repo.prune.pipe(Effect.timeout("5 seconds"))).toEqual({ done: 40, cancelled: 0, dead: 0 })
      yield* Effect.promise(() => locker.query("COMMIT"))
      expect(yield* repo.prune).toEqual({ done: 10, cancelled: 0, dead: 0 })
      // Its plan can walk each table's finished index in order, under the
      // batch's limit, with no sort (tables this small would be scanned, or
      // read by bitmap and sorted, instead: both are off for the EXPLAIN only).
      const explain = (text: string, params: ReadonlyArray<unknown> = []) =>
        sql.withTransaction(Effect.zipRight(
          sql.unsafe("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off"),
          sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${schemaOf(url).qualify(text)}`, params)
        )).pipe(Effect.map((rows) => rows.map((r) => r["QUERY PLAN"]).join("\n")))
      const plan = yield* explain(Prune.pgDone, [86_400_000, 1000])
      expect(plan).toMatch(/Index Scan using docket_done_finished/)
      expect(plan).toMatch(/Index Scan using docket_items_finished/)
      // The DELETE takes the rows the walk locked by their address: no join
      // of the batch to the table (where seqscan is allowed, as outside this
      // EXPLAIN, that join read all of a small table).
      expect(plan).toMatch(/Tid Scan on docket_done/)
      expect(plan).toMatch(/Tid Scan on docket_items/)
      expect(plan).not.toMatch(/Seq Scan|Hash Semi Join/)
      // (Its counts are sorted by kind, a few rows: the walk itself is not.)
      expect(plan).not.toMatch(/Sort Key: \w+\.finished_at/)
      // `list` of done items merges both tables' indexes walked backwards from the cursor's key, no sort either.
      const listPlan = yield* explain(List.pg.finished, ["done", null, 1e15, 1e15, 51])
      expect(listPlan).toMatch(/Merge Append/)
      expect(listPlan).toMatch(/Index Scan Backward using docket_done_finished/)
      expect(listPlan).toMatch(/Index Scan Backward using docket_items_finished/)
      expect(listPlan).not.toMatch(/Sort  /)
      // A listing of dead items leaves docket_done out (its CHECK says it holds done items only).
      const deadPlan = yield* explain(List.pg.finished, ["dead", null, 1e15, 1e15, 51])
      expect(deadPlan).toMatch(/docket_items_finished/)
      expect(deadPlan).not.toMatch(/docket_done/)
    }).pipe(Effect.scoped, Effect.timeout("30 seconds")))

  // Every pool prunes; on PostgreSQL two pruners run at once for real.
  // Each row is deleted by exactly one of them and counted once: the
  // totals (docket_counts) say every item finished, none twice.
  it.live("pruners in three pools at once delete and count every expired row exactly once", () =>
    Effect.gen(function*() {
      const [a, b, c] = yield* pools(backend, 3)
      const repos = [a, b, c].map((context) => Context.get(context, QueueRepo.QueueRepo))
      const total = 4_321
      yield* repos[0].enqueueMany(Array.from({ length: total }, (_, i) => ({ kind: i % 2 === 0 ? "even" : "odd", payload: i })))
      const claims = yield* repos[0].claim({ worker: "w", limit: total, lease: 60_000 })
      expect(claims).toHaveLength(total)
      yield* repos[0].completeMany(claims)
      yield* ageFinished(172_800_000).pipe(Effect.provide(a))
      // Each pool prunes until a pass finds nothing; all three at once.
      const pruneAll = (repo: QueueRepo.Service) =>
        Effect.iterate({ deleted: 0, last: -1 }, {
          while: (s) => s.last !== 0,
          body: (s) => Effect.map(repo.prune, (r) => ({ deleted: s.deleted + r.done, last: r.done }))
        })
      const counts = yield* Effect.all(repos.map(pruneAll), { concurrency: "unbounded" })
      expect(counts.reduce((sum, r) => sum + r.deleted, 0)).toBe(total)
      expect(yield* countState("done").pipe(Effect.provide(a))).toBe(0)
      const totals = yield* unsafe<{ kind: string; n: string }>(
        "SELECT kind, n FROM docket_counts WHERE what = 'done' ORDER BY kind"
      ).pipe(Effect.provide(a))
      expect(totals.map((r) => [r.kind, Number(r.n)])).toEqual([["even", Math.ceil(total / 2)], ["odd", Math.floor(total / 2)]])
    }).pipe(Effect.scoped, Effect.timeout("60 seconds")))
}
