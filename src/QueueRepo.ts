/**
 * `QueueRepo`: Docket's storage service. One service, one implementation per
 * SQL dialect (PostgreSQL or SQLite), chosen once when the service is built
 * from the `SqlClient` in context.
 *
 * Every operation validates its input first (a typed `InvalidInput`, nothing
 * written) and reports database failures as a typed `StorageError`. Every
 * change after a claim is fenced by the claim's token: a worker whose lease was
 * lost, and whose item another worker claimed, changes nothing.
 *
 * @example
 * ```ts
 * const repo = yield* QueueRepo.QueueRepo
 * yield* repo.enqueue("email.send", { to: "a@example.com" }, { key: "msg-1" })
 * const [claim] = yield* repo.claim({ worker: "w1", limit: 1, lease: "30 seconds" })
 * yield* repo.complete(claim)
 * ```
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { Retention } from "./Domain.js"
import * as Storage from "./internal/storage.js"
import * as Cancel from "./internal/store/cancel.js"
import * as Claims from "./internal/store/claims.js"
import * as Dead from "./internal/store/dead.js"
import * as Enqueue from "./internal/store/enqueue.js"
import * as GroupList from "./internal/store/groupList.js"
import * as History from "./internal/store/history.js"
import * as Insights from "./internal/store/insights.js"
import * as Items from "./internal/store/items.js"
import * as Groups from "./internal/store/groups.js"
import * as Kinds from "./internal/store/kinds.js"
import * as Prepare from "./internal/store/prepare.js"
import * as Schedules from "./internal/store/schedules.js"
import * as Transaction from "./internal/store/transaction.js"
import * as Workers from "./internal/store/workers.js"
import * as V from "./internal/validate.js"
import * as Wakeups from "./Wakeups.js"

/** The domain types, for users of the service (defined in Domain.ts). */
export type * from "./Domain.js"
/** The storage service's interface (declared beside the store's parts, which implement it). */
export type { Service } from "./internal/store/service.js"
import type { Service } from "./internal/store/service.js"

/** The `QueueRepo` service tag. */
export class QueueRepo extends Context.Tag("docket/QueueRepo")<QueueRepo, Service>() {}

/** Options of `make`, `makeScoped` and `layer`. */
export interface Options {
  /** Largest accepted payload, as JSON bytes (default 1 MiB). */
  readonly maxPayloadBytes?: number | undefined
  /**
   * Attempts before dead of an item enqueued without `maxAttempts` whose kind
   * has no budget in the claim's `maxAttemptsByKind` (a worker pool passes its
   * handlers' `maxAttempts`): applied by this service's claims, not written at
   * enqueue (default 8, as the reference).
   */
  readonly defaultMaxAttempts?: number | undefined
  /**
   * How long finished items are kept, by state (`{ done, cancelled, dead }`:
   * a duration, or "forever"); defaults done and cancelled 24 hours, dead
   * forever. `done: 0` deletes an item at its complete (no history, as before);
   * a cancelled or dead 0 deletes them at the next prune. Every process prunes
   * by its own retention: set the same everywhere (docs/operations.md). A bad
   * value is an `InvalidInput` on `retention`, thrown when the service is built.
   */
  readonly retention?: Retention | undefined
  /** Largest accepted result of a completion, as JSON bytes (default 64 KiB). */
  readonly maxResultBytes?: number | undefined
}

/** Attempts before an item is dead, when neither the enqueue, its handler nor `Options` give a number. */
export const DEFAULT_MAX_ATTEMPTS = 8

/** Builds the service over the `SqlClient` in context (PostgreSQL or SQLite). */
export const make = (options: Options = {}): Effect.Effect<Service, never, SqlClient.SqlClient | Wakeups.Wakeups> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return makeWith(yield* Storage.make(sql), yield* Wakeups.Wakeups, options)
  })

/**
 * As `make`, and on PostgreSQL claims run on a connection reserved from the
 * pool (see internal/sql/claimAcquire.ts), released when the scope closes. `layer` uses it.
 */
export const makeScoped = (
  options: Options = {}
): Effect.Effect<Service, never, SqlClient.SqlClient | Wakeups.Wakeups | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return makeWith(yield* Storage.make(sql, yield* Effect.scope), yield* Wakeups.Wakeups, options)
  })

// Wires the parts (internal/store/): each holds one responsibility of the
// service, over the storage (its dialect chosen once, in Storage.make).
const makeWith = (store: Storage.Storage, wakeups: Wakeups.Service, options: Options): Service => {
  const prepare = Prepare.make({ maxPayloadBytes: options.maxPayloadBytes ?? V.DEFAULT_MAX_PAYLOAD_BYTES })
  // A bad retention or result limit is the application's programming error,
  // thrown while the service is built (as a bad defaultMaxAttempts), typed.
  const thrown = (error: unknown) => error
  const retention = Either.getOrThrowWith(History.resolveRetention(options.retention), thrown)
  const maxResultBytes = Either.getOrThrowWith(
    V.checkIntegerIn("result", options.maxResultBytes ?? V.DEFAULT_MAX_RESULT_BYTES, 2, 64 * 1024 * 1024),
    thrown
  )
  const enqueue = Enqueue.make(store, wakeups, prepare)
  return {
    dialect: store.dialect,
    ...Transaction.make(store),
    ...enqueue,
    ...Claims.make(store, options.defaultMaxAttempts ?? DEFAULT_MAX_ATTEMPTS, {
      keepDone: retention.done !== 0,
      maxResultBytes
    }),
    ...History.make(store, retention),
    ...Items.make(store),
    ...Dead.make(store, wakeups),
    ...Kinds.make(store, wakeups),
    ...Groups.make(store, wakeups),
    ...Cancel.make(store, wakeups),
    ...Workers.make(store),
    ...Schedules.make(store, wakeups, enqueue.enqueueMany),
    ...Insights.make(store, wakeups),
    ...GroupList.make(store)
  }
}

/** The service over the `SqlClient` in context, and the `Wakeups` its worker pools use. */
export const layer = (options: Options = {}): Layer.Layer<QueueRepo | Wakeups.Wakeups, never, SqlClient.SqlClient> =>
  Layer.scoped(QueueRepo, makeScoped(options)).pipe(Layer.provideMerge(Wakeups.layer()))
