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
import { SqlClient } from "@effect/sql"
import { Context, Effect, Either, Layer, Option, type Scope } from "effect"
import type { Retention } from "./Domain.js"
import type { Dialect } from "./internal/dialect.js"
import * as DirectPool from "./internal/directPool.js"
import * as Pg from "./internal/pg.js"
import * as Sqlite from "./internal/sqlite.js"
import * as Cancel from "./internal/store/cancel.js"
import * as Claims from "./internal/store/claims.js"
import * as Dead from "./internal/store/dead.js"
import { storage, toItem, toStats, toWait } from "./internal/store/decode.js"
import * as Enqueue from "./internal/store/enqueue.js"
import * as History from "./internal/store/history.js"
import * as Insights from "./internal/store/insights.js"
import * as Kinds from "./internal/store/kinds.js"
import * as Prepare from "./internal/store/prepare.js"
import * as Schedules from "./internal/store/schedules.js"
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

const dialectOf = (sql: SqlClient.SqlClient, claimScope?: Scope.Scope): Effect.Effect<Dialect> =>
  Effect.map(Effect.serviceOption(DirectPool.DirectPool), (direct) =>
    sql.onDialectOrElse({
      pg: () => Pg.make(sql, claimScope, Option.getOrUndefined(direct)),
      sqlite: () => Sqlite.make(sql),
      orElse: () => {
        throw new Error("Docket supports PostgreSQL and SQLite only")
      }
    }))

/** Builds the service over the `SqlClient` in context (PostgreSQL or SQLite). */
export const make = (options: Options = {}): Effect.Effect<Service, never, SqlClient.SqlClient | Wakeups.Wakeups> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return makeWith(yield* dialectOf(sql), yield* Wakeups.Wakeups, options)
  })

/**
 * As `make`, and on PostgreSQL claims run on a connection reserved from the
 * pool (see internal/pg.ts), released when the scope closes. `layer` uses it.
 */
export const makeScoped = (
  options: Options = {}
): Effect.Effect<Service, never, SqlClient.SqlClient | Wakeups.Wakeups | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return makeWith(yield* dialectOf(sql, yield* Effect.scope), yield* Wakeups.Wakeups, options)
  })

// Wires the parts (internal/store/): each holds one responsibility of the
// service, over the dialect chosen in dialectOf.
const makeWith = (dialect: Dialect, wakeups: Wakeups.Service, options: Options): Service => {
  const prepare = Prepare.make({ maxPayloadBytes: options.maxPayloadBytes ?? V.DEFAULT_MAX_PAYLOAD_BYTES })
  // A bad retention or result limit is the application's programming error,
  // thrown while the service is built (as a bad defaultMaxAttempts), typed.
  const thrown = (error: unknown) => error
  const retention = Either.getOrThrowWith(History.resolveRetention(options.retention), thrown)
  const maxResultBytes = Either.getOrThrowWith(
    V.checkIntegerIn("result", options.maxResultBytes ?? V.DEFAULT_MAX_RESULT_BYTES, 2, 64 * 1024 * 1024),
    thrown
  )
  const enqueue = Enqueue.make(dialect, wakeups, prepare)
  return {
    dialect: dialect.name,
    ...enqueue,
    ...Claims.make(dialect, options.defaultMaxAttempts ?? DEFAULT_MAX_ATTEMPTS, {
      keepDone: retention.done !== 0,
      maxResultBytes
    }),
    ...History.make(dialect, retention),
    stats: dialect.stats.pipe(Effect.map(toStats), Effect.mapError(storage("stats"))),
    // An id that is not a positive safe integer names no item: None on every
    // dialect, without a query (PostgreSQL would refuse 1.5 or NaN as a bigint
    // and report a StorageError, while SQLite answered None).
    get: (id) =>
      !Number.isSafeInteger(id) || id < 1 ? Effect.succeed(Option.none()) : dialect.get(id).pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toItem)),
        Effect.mapError(storage("get"))
      ),
    // As `get`: ids that name no item are left out without a query.
    getMany: (ids) => {
      const valid = [...new Set(ids)].filter((id) => Number.isSafeInteger(id) && id >= 1)
      return valid.length === 0 ? Effect.succeed([]) : dialect.getMany(valid).pipe(
        Effect.map((rows) => rows.map(toItem)),
        Effect.mapError(storage("getMany"))
      )
    },
    ...Dead.make(dialect),
    ...Kinds.make(dialect, wakeups),
    ...Cancel.make(dialect, wakeups),
    nextDueIn: dialect.nextDue.pipe(Effect.map(toWait), Effect.mapError(storage("nextDueIn"))),
    ...Workers.make(dialect),
    ...Schedules.make(dialect, wakeups, enqueue.enqueueMany),
    ...Insights.make(dialect, wakeups)
  }
}

/** The service over the `SqlClient` in context, and the `Wakeups` its worker pools use. */
export const layer = (options: Options = {}): Layer.Layer<QueueRepo | Wakeups.Wakeups, never, SqlClient.SqlClient> =>
  Layer.scoped(QueueRepo, makeScoped(options)).pipe(Layer.provideMerge(Wakeups.layer()))
