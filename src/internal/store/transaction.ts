/**
 * `QueueRepo.Service.transaction`: an effect in one transaction of the store's
 * own database, so the store's operations inside it and the application's
 * statements (through any `SqlClient` of that database: @effect/sql's
 * transaction connection is found by every client in the fiber's context)
 * commit together or not at all. A worker pool runs a `transactional`
 * handler's run and its item's completion in one (worker/transactional.ts).
 *
 * Only the transaction's own statements (BEGIN, COMMIT, ROLLBACK) fail as a
 * `StorageError`; the effect's failures, an `SqlError` of the application's
 * statements among them, roll back and come out as they are, so a caller can
 * tell its own failure from the store's.
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../../Errors.js"
import type * as Storage from "../storage.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** The operation. */
export type Transaction = Pick<Service, "transaction">

// The effect's own failure, boxed so that it is not taken for the transaction's.
class Own<E> {
  constructor(readonly error: E) {}
}

/** The part over the storage's unit of work. */
export const make = (store: Pick<Storage.Storage, "transaction">): Transaction => ({
  transaction: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StorageError, R> =>
    store.transaction(Effect.mapError(effect, (error) => new Own(error))).pipe(
      Effect.mapError((error): E | StorageError => (error instanceof Own ? (error as Own<E>).error : storage("transaction")(error)))
    )
})
