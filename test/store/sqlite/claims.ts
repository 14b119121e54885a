/**
 * SQLite only, the claim: its synchronous level and its plan.
 * Registered by test/store/sqlite.test.ts.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Effect, Layer, Option } from "effect"
import { Database, QueueRepo } from "../../../src/index.js"
import * as Claim from "../../../src/internal/sql/claimAcquire.js"
import * as Db from "../../../src/internal/sql/db.js"
import type { Backend } from "../../support/db.js"

// Claims commit with synchronous = NORMAL (src/internal/sql/claimAcquire.ts says why);
// everything else keeps the configured level. The statements better-sqlite3
// runs are recorded in order (its statement methods wrapped, for these tests).
const synchronousLevel = (backend: Backend) =>
  describe("QueueRepo on SQLite: the claim's synchronous level", () => {
    const ran: Array<string> = []
    const proto = Object.getPrototypeOf(new Sqlite(":memory:").prepare("SELECT 1")) as Record<string, Function>
    const originals = Object.fromEntries(["all", "get", "run", "iterate"].map((m) => [m, proto[m]]))
    beforeAll(() => {
      for (const [method, original] of Object.entries(originals)) {
        proto[method] = function(this: { source: string }, ...args: Array<unknown>) {
          ran.push(this.source.trim().split(/\s+/).slice(0, 4).join(" "))
          return original.apply(this, args)
        }
      }
    })
    afterAll(() => Object.assign(proto, originals))

    const level = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<{ synchronous: number }>("PRAGMA synchronous")).pipe(
      Effect.map((rows) => rows[0].synchronous)
    )
    const claim = Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.claim({ worker: "w", limit: 10, lease: "1 minute" }))
    /**
     * The statements around the claim's two (its read of the kinds' controls,
     * then its UPDATE): the one before the first and the one after the last.
     */
    const aroundClaim = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.gen(function*() {
        ran.length = 0
        const result = yield* Effect.either(effect)
        const first = ran.findIndex((text) => text.startsWith("WITH RECURSIVE grouped(kind) AS"))
        const last = ran.findIndex((text) => text.startsWith("WITH controlled AS ("))
        expect(first).toBeGreaterThanOrEqual(0)
        expect(last).toBe(first + 1)
        return { result, before: ran[first - 1], after: ran[last + 1] }
      })
    const withRepo = <A, E>(
      options: Database.Options,
      body: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>
    ) =>
      Effect.flatMap(Effect.promise(() => backend.fresh()), (url) =>
        Effect.provide(body, QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, options)))))

    it.effect("a claim runs at NORMAL and the configured level is back after it, after a failed claim too", () =>
      withRepo({}, Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        expect(yield* level).toBe(2) // FULL, Docket's default
        yield* repo.enqueue("k", 1)
        const ok = yield* aroundClaim(claim)
        expect(ok.result._tag === "Right" && ok.result.right).toHaveLength(1)
        expect([ok.before, ok.after]).toEqual(["PRAGMA synchronous = NORMAL", "PRAGMA synchronous = 2"])
        expect(yield* level).toBe(2)
        // The enqueue ran at FULL: nothing set NORMAL before it.
        ran.length = 0
        yield* repo.enqueue("k", 2)
        expect(ran.some((text) => text.includes("NORMAL"))).toBe(false)
        // A claim that fails (its table is gone) still sets the level back.
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ALTER TABLE docket_items RENAME TO docket_items_gone")
        ran.length = 0
        const failed = yield* Effect.either(claim)
        expect(failed._tag).toBe("Left")
        expect(ran.at(-1)).toBe("PRAGMA synchronous = 2")
        expect(yield* level).toBe(2)
      })))

    it.effect("no change when the configured level is NORMAL, nor outside WAL mode", () =>
      Effect.gen(function*() {
        yield* withRepo({ sqliteSynchronous: "normal" }, Effect.gen(function*() {
          yield* Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue("k", 1))
          const { before, after, result } = yield* aroundClaim(claim)
          expect(result._tag === "Right" && result.right).toHaveLength(1)
          expect([before, after]).not.toContain("PRAGMA synchronous = NORMAL")
          expect(yield* level).toBe(1)
        }))
        yield* withRepo({}, Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe("PRAGMA journal_mode = DELETE")
          yield* Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue("k", 1))
          const { result } = yield* aroundClaim(claim)
          expect(result._tag === "Right" && result.right).toHaveLength(1)
          expect(ran.some((text) => text.includes("NORMAL"))).toBe(false)
          expect(yield* level).toBe(2)
        }))
      }))

    it.effect("a claim inside the caller's transaction runs in it, and is undone with it", () =>
      withRepo({}, Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const sql = yield* SqlClient.SqlClient
        const { id } = yield* repo.enqueue("k", 1)
        const inside = yield* Effect.either(sql.withTransaction(Effect.zipRight(claim, Effect.fail("undo" as const))))
        expect(inside._tag).toBe("Left")
        expect(Option.getOrUndefined(yield* repo.get(id))).toMatchObject({ state: "waiting", attempts: 0 })
        const { result } = yield* aroundClaim(sql.withTransaction(claim))
        expect(result._tag === "Right" && result.right).toHaveLength(1)
        expect(ran.some((text) => text.includes("NORMAL"))).toBe(false)
        expect(yield* level).toBe(2)
      })))
  })

// migrations/sqlite/0013_claim_skip_scan.sql: the claim walks its index a
// priority at a time (a skip-scan) and never through the items not yet due.
// Read from the plan, not timed: without the statistic the plan is a SCAN of
// the whole index (an empty claim over 1,000,000 items not yet due took 54 ms,
// with it 0.15 ms; docs/benchmarks.md).
const claimPlan = (backend: Backend) =>
  describe("QueueRepo on SQLite: the claim's plan", () => {
    const planOf = (file: string) => {
      const db = new Sqlite(file, { readonly: true })
      try {
        // Numbered parameters bound as the runner binds them.
        const { params, text } = Db.compiled(Claim.sqlite, ["w", 10, 60_000, null, 1])
        return (db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(...params) as Array<{ detail: string }>)
          .map((r) => r.detail)
          .filter((detail) => detail.includes("docket_items_claim"))
      } finally {
        db.close()
      }
    }

    it.effect("skips by priority to the due items, on a new file and after the upgrade from 0012", () =>
      Effect.gen(function*() {
        const fresh = yield* Effect.promise(() => backend.fresh())
        yield* Effect.provide(Effect.void, Database.layer(fresh))
        expect(planOf(fresh)).toEqual(["SEARCH i USING INDEX docket_items_claim (ANY(priority) AND run_at<?)"])

        // A file at 0012 (no statistic) plans a SCAN; the upgrade gives it the statistic.
        const old = yield* Effect.promise(() => backend.fresh())
        yield* Effect.provide(Effect.void, Database.layer(old))
        const db = new Sqlite(old)
        db.exec("DELETE FROM sqlite_stat1; DELETE FROM docket_migrations WHERE migration_id >= 13")
        expect(planOf(old)).toEqual(["SCAN i USING INDEX docket_items_claim"])
        // 0017 to 0020 made what they do not make again: undone, so that 0013 to the latest run on
        // (0020's claim index, on group_key, back to 0006's).
        db.exec(`DROP INDEX docket_items_claim;
          CREATE INDEX docket_items_claim ON docket_items (priority DESC, run_at, id) WHERE state = 'waiting';
          DROP INDEX docket_items_group_dead; DROP TABLE docket_groups; DROP TABLE docket_group_starts;
          ALTER TABLE docket_kinds DROP COLUMN paused_groups; ALTER TABLE docket_kinds DROP COLUMN group_on_failure;
          ALTER TABLE docket_kinds DROP COLUMN group_on_dead; ALTER TABLE docket_kinds DROP COLUMN group_rate_limit;
          ALTER TABLE docket_kinds DROP COLUMN group_rate_period_ms; ALTER TABLE docket_kinds DROP COLUMN group_limits_set_by;
          DROP INDEX docket_items_group; DROP INDEX docket_items_group_running; DROP INDEX docket_items_group_due;
          ALTER TABLE docket_items DROP COLUMN group_key; ALTER TABLE docket_kinds DROP COLUMN group_concurrency;
          ALTER TABLE docket_kinds DROP COLUMN group_ordered; ALTER TABLE docket_kinds DROP COLUMN group_cursor;
          DROP TABLE docket_workflow_executions; DROP TABLE docket_workflow_activities;
          DROP TABLE docket_workflow_deferreds; DROP TABLE docket_workflow_clocks`)
        db.close()
        yield* Effect.provide(Effect.void, Database.layer(old))
        expect(planOf(old)).toEqual(["SEARCH i USING INDEX docket_items_claim (ANY(priority) AND run_at<?)"])
      }))
  })

/** Registers these tests for the SQLite backend. */
export const sqliteClaimsTests = (backend: Backend) => {
  synchronousLevel(backend)
  claimPlan(backend)
}
