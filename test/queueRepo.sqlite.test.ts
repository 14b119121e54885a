import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Database, QueueRepo } from "../src/index.js"
import { queueRepoConformance } from "./conformance/queueRepo.js"
import { sqliteBackend } from "./support/db.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())
describe("QueueRepo on SQLite", () => queueRepoConformance(backend))

// Claims commit with synchronous = NORMAL (src/internal/sqlite.ts says why);
// everything else keeps the configured level.
describe("QueueRepo on SQLite: the claim's synchronous level", () => {
  const level = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<{ synchronous: number }>("PRAGMA synchronous")).pipe(
    Effect.map((rows) => rows[0].synchronous)
  )
  const claim = Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.claim({ worker: "w", limit: 10, lease: "1 minute" }))
  const withRepo = <A, E>(
    options: Database.Options,
    body: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>
  ) =>
    Effect.flatMap(Effect.promise(() => backend.fresh()), (url) =>
      Effect.provide(body, QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, options)))))

  it.effect("the configured level is back after a claim, after a failed claim, and unchanged at NORMAL", () =>
    Effect.gen(function*() {
      yield* withRepo({}, Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        expect(yield* level).toBe(2) // FULL, Docket's default
        yield* repo.enqueue("k", 1)
        expect(yield* claim).toHaveLength(1)
        expect(yield* level).toBe(2)
        // A claim that fails (the table is gone) still sets the level back.
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ALTER TABLE docket_items RENAME TO docket_items_gone")
        const failed = yield* Effect.either(claim)
        expect(failed._tag).toBe("Left")
        expect(yield* level).toBe(2)
      }))
      yield* withRepo({ sqliteSynchronous: "normal" }, Effect.gen(function*() {
        expect(yield* level).toBe(1)
        yield* Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue("k", 1))
        expect(yield* claim).toHaveLength(1)
        expect(yield* level).toBe(1)
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
      expect(yield* sql.withTransaction(claim)).toHaveLength(1)
      expect(yield* level).toBe(2)
    })))
})
