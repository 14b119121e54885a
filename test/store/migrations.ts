/**
 * The shared store suite: running the migrations (twice, concurrently, in racing processes).
 * Run on every backend by test/store/sqlite.test.ts and test/store/pg.test.ts.
 */
import { SqlClient } from "@effect/sql"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Database from "../../src/Database.js"
import * as Migrations from "../../src/Migrations.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, repoLayer } from "../support/db.js"
import { getItem } from "../support/store.js"

const Repo = QueueRepo.QueueRepo

/** Every migration's id (migrations/{pg,sqlite} have the same numbers). */
const ALL_MIGRATIONS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22]

/** Rows in the migrations bookkeeping table. */
const migrationRows = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe<{ migration_id: number | string }>(
    `SELECT migration_id FROM ${Migrations.TABLE} ORDER BY migration_id`
  )).pipe(Effect.map((rows) => rows.map((r) => Number(r.migration_id))))

const MIGRATE_PROCESS = fileURLToPath(new URL("../support/migrateProcess.ts", import.meta.url))

interface RacerResult {
  readonly applied?: ReadonlyArray<number>
  readonly error?: string
  readonly code: number | null
  readonly stderr: string
}

/**
 * Starts `count` migrator processes on one database, waits until every one is
 * connected, then lets them all migrate at once (a barrier, not a sleep).
 */
const racingMigrators = (url: string, count: number) =>
  Effect.tryPromise(() => {
    const children = Array.from({ length: count }, () =>
      spawn(process.execPath, ["--import", "tsx", MIGRATE_PROCESS, url], { stdio: ["pipe", "pipe", "pipe"] }))
    let ready = 0
    const results = children.map((child) =>
      new Promise<RacerResult>((resolve, reject) => {
        let out = ""
        let stderr = ""
        child.stdout.on("data", (chunk: Buffer) => {
          const before = out
          out += chunk.toString("utf8")
          if (!before.includes("ready\n") && out.includes("ready\n") && ++ready === count) {
            for (const c of children) c.stdin.write("go\n")
          }
        })
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString("utf8")
        })
        child.on("error", reject)
        child.on("exit", (code) => {
          // A racer that died before the barrier: stop the others rather than leave them waiting.
          if (ready < count) for (const c of children) c.kill("SIGKILL")
          const last = out.trim().split("\n").filter((line) => line.startsWith("{")).pop()
          resolve({ ...(last === undefined ? {} : JSON.parse(last)), code, stderr })
        })
      })
    )
    return Promise.all(results).finally(() => {
      for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
    })
  })

const migrations = (backend: Backend) => {
  describe("migrations", () => {
    it.live("running the migrations twice: the second run is a no-op", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        yield* Effect.gen(function*() {
          expect(yield* Migrations.run).toEqual(ALL_MIGRATIONS)
          expect(yield* Migrations.run).toEqual([])
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          const repo = yield* Repo
          const added = yield* repo.enqueue("job", {})
          expect(yield* Migrations.run).toEqual([])
          expect((yield* getItem(added.id)).state).toBe("waiting")
        }).pipe(Effect.provide(QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { migrate: false })))))
        // A layer that migrates on build finds nothing to do and keeps the data.
        yield* Effect.gen(function*() {
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          expect(yield* countAll).toBe(1)
        }).pipe(Effect.provide(repoLayer(url)))
      }))

    it.live("two migrators at the same time on a fresh database both succeed; one applies the schema", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const migrator = Effect.provide(Migrations.run, Database.layer(url, { migrate: false }))
        const results = yield* Effect.all([migrator, migrator], { concurrency: "unbounded" })
        expect(results.flat()).toEqual(ALL_MIGRATIONS)
        yield* Effect.gen(function*() {
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          const repo = yield* Repo
          expect((yield* repo.enqueue("job", {}))._tag).toBe("Enqueued")
        }).pipe(Effect.provide(repoLayer(url)))
      }))

    it.live("three migrator processes released at once on a fresh database all succeed; one applies the schema", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const results = yield* racingMigrators(url, 3)
        for (const result of results) {
          expect(result.error, result.stderr).toBeUndefined()
          expect(result.code, result.stderr).toBe(0)
        }
        expect(results.flatMap((r) => r.applied ?? [])).toEqual(ALL_MIGRATIONS)
        yield* Effect.gen(function*() {
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          const repo = yield* Repo
          expect((yield* repo.enqueue("job", {}))._tag).toBe("Enqueued")
        }).pipe(Effect.provide(repoLayer(url)))
      }), 60_000)

    it.live("three Database layers built at once on a fresh database all come up migrated", () =>
      Effect.scoped(Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const contexts = yield* Effect.all(
          [0, 1, 2].map(() => Layer.build(repoLayer(url))),
          { concurrency: "unbounded" }
        )
        for (const context of contexts) {
          yield* Effect.gen(function*() {
            expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
            const repo = yield* Repo
            expect((yield* repo.enqueue("job", {}))._tag).toBe("Enqueued")
          }).pipe(Effect.provide(context))
        }
        yield* Effect.provide(countAll, contexts[0]).pipe(Effect.map((n) => expect(n).toBe(3)))
      })))
  })
}

/** Registers the migrations tests for a backend. */
export const migrationsSuite = (backend: Backend) => {
  migrations(backend)
}
