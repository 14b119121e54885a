/**
 * Helpers of the shared store suite (test/store/): the item that must exist,
 * the typed failures an operation must end with, and each test's fresh
 * database with a migrated QueueRepo.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { expect } from "@effect/vitest"
import { Effect, Option } from "effect"
import { InvalidInput, type InvalidField, StorageError } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { asAdmin, type Backend } from "./db.js"
import { withRepo } from "./harness.js"

const Repo = QueueRepo.QueueRepo

/** The item, which must exist. */
export const getItem = (id: number) =>
  Effect.flatMap(Repo, (repo) => repo.get(id)).pipe(
    Effect.map((item) => {
      expect(Option.isSome(item), `item ${id} exists`).toBe(true)
      return Option.getOrThrow(item)
    })
  )

/** Fails the test unless the effect fails with InvalidInput on `field`. */
export const expectInvalid = <A, E, R>(effect: Effect.Effect<A, E, R>, field: InvalidField) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    expect(error).toBeInstanceOf(InvalidInput)
    expect((error as InvalidInput)._tag).toBe("InvalidInput")
    expect((error as InvalidInput).field).toBe(field)
    return error as InvalidInput
  })

/** Fails the test unless the effect fails with a StorageError. */
export const expectStorageError = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    expect(error).toBeInstanceOf(StorageError)
    expect((error as StorageError)._tag).toBe("StorageError")
    return error as StorageError
  })

/** Drops the queue table (on PostgreSQL with the claim function that returns its rows, as the administrator). */
export const dropTable: Effect.Effect<void, SqlError, SqlClient.SqlClient> = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    pg: () => asAdmin("DROP TABLE docket_items CASCADE"),
    orElse: () => Effect.asVoid(sql.unsafe("DROP TABLE docket_items"))
  }))

export const TOP = 2_000_000_000

/**
 * What every store test starts from: `run` gives a program a fresh database
 * with a migrated QueueRepo; `deadItem` takes a new item to dead.
 */
export const storeContext = (backend: Backend) => {
  const lease = "30 seconds"
  const run = <A, E>(
    program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>,
    options: QueueRepo.Options = {}
  ) => withRepo(backend, program, options)

  /** Enqueues an item and takes it to dead (claimed alone, failed with Dead). */
  const deadItem = (kind: string, key?: string, error = "broken") =>
    Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue(kind, { dead: true }, { key, priority: TOP })
      expect(added._tag).toBe("Enqueued")
      const [claim] = yield* repo.claim({ worker: "killer", limit: 1, lease, kinds: [kind] })
      expect(claim.id).toBe(added.id)
      expect(yield* repo.fail(claim, error, { _tag: "Dead" })).toBe("dead")
      return added.id
    })
  return { lease, run, deadItem } as const
}
