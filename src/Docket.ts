/**
 * Docket in an Effect application: one layer for the database, the queue and
 * the worker pool; typed clients that enqueue through a handler's Schema; and
 * the "try at once, queue only on failure" helper.
 *
 * @example
 * ```ts
 * const SendEmail = Handler.make("email.send", { payload: Email, run: send })
 * const DocketLive = Docket.layer({ database: "./docket.db", handlers: [SendEmail] })
 *
 * const program = Effect.gen(function*() {
 *   yield* Docket.client(SendEmail).enqueue({ to: "a@example.com", subject: "Hi" })
 * })
 * program.pipe(Effect.provide(DocketLive), NodeRuntime.runMain)
 * ```
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Backoff from "./Backoff.js"
import * as Database from "./Database.js"
import { InvalidInput, type InvalidSchedule, type MigrationFailed, type StorageError } from "./Errors.js"
import type * as Handler from "./Handler.js"
import { decide } from "./internal/decide.js"
import * as QueueRepo from "./QueueRepo.js"
import type * as Wakeups from "./Wakeups.js"
import * as Worker from "./Worker.js"

/** `Docket.layer`'s options: the worker pool's, plus the database and the repository's. */
export interface LayerOptions<H extends Handler.Any> extends Worker.Options<H> {
  /** A database URL or target (default: DOCKET_DATABASE_URL, else ./docket.db). */
  readonly database?: string | Database.Target | undefined
  readonly databaseOptions?: Database.Options | undefined
  readonly repo?: QueueRepo.Options | undefined
  /**
   * How long finished items are kept, by state (`QueueRepo.Options.retention`;
   * given here, it wins over `repo.retention`). This pool prunes by it.
   */
  readonly retention?: QueueRepo.Retention | undefined
}

/**
 * The database (migrated), the `QueueRepo` and a running worker pool (with its
 * recurring schedules, `recurring`), in one layer. Releasing the layer shuts
 * the pool down gracefully. A bad schedule fails it with `InvalidSchedule`, a
 * bad `databaseOptions.schema` with `InvalidInput`.
 */
export const layer = <H extends Handler.Any>(
  options: LayerOptions<H>
): Layer.Layer<
  Worker.Worker | QueueRepo.QueueRepo | Wakeups.Wakeups | SqlClient.SqlClient,
  Database.DatabaseUnavailable | MigrationFailed | InvalidInput | InvalidSchedule,
  // The database's client is this layer's own: a handler that writes through it is given it.
  Exclude<Handler.Requirements<H>, SqlClient.SqlClient | QueueRepo.QueueRepo | Wakeups.Wakeups>
> => Worker.layer(options).pipe(Layer.provideMerge(layerStore(options)))

/** `layerStore`'s options: the database and the repository's, as `layer` takes them. */
export type StoreOptions = Pick<LayerOptions<Handler.Any>, "database" | "databaseOptions" | "repo" | "retention">

/**
 * The database (migrated) and the `QueueRepo` of `layer`, without a worker
 * pool: for a pool built on top of it (docket/Workflows builds its engine
 * between the two). The database is `options.database`, else
 * DOCKET_DATABASE_URL, else ./docket.db.
 */
export const layerStore = (
  options: StoreOptions
): Layer.Layer<
  QueueRepo.QueueRepo | Wakeups.Wakeups | SqlClient.SqlClient,
  Database.DatabaseUnavailable | MigrationFailed | InvalidInput
> => {
  const database = options.database === undefined
    ? Database.layerConfig(options.databaseOptions).pipe(
      Layer.catchAll((error) =>
        error._tag === "DatabaseUnavailable" || error._tag === "MigrationFailed" || error._tag === "InvalidInput"
          ? Layer.fail(error)
          : Layer.fail(new Database.DatabaseUnavailable({ target: "DOCKET_DATABASE_URL", reason: String(error) }))
      )
    )
    : Database.layer(options.database, options.databaseOptions)
  const repoOptions = options.retention === undefined ? options.repo : { ...options.repo, retention: options.retention }
  return QueueRepo.layer(repoOptions).pipe(Layer.provideMerge(database))
}

/** The queue without a worker pool (for processes that only enqueue). */
export const layerClient = (
  database: string | Database.Target,
  options: { readonly databaseOptions?: Database.Options; readonly repo?: QueueRepo.Options } = {}
): Layer.Layer<
  QueueRepo.QueueRepo | Wakeups.Wakeups | SqlClient.SqlClient,
  Database.DatabaseUnavailable | MigrationFailed | InvalidInput
> =>
  QueueRepo.layer(options.repo).pipe(Layer.provideMerge(Database.layer(database, options.databaseOptions)))

/** Enqueues items of one handler's kind, encoded and checked with its Schema. */
export interface Client<A> {
  readonly kind: string
  /** Adds an item; joins the caller's transaction when there is one. */
  readonly enqueue: (
    payload: A,
    options?: QueueRepo.EnqueueOptions
  ) => Effect.Effect<QueueRepo.EnqueueResult, InvalidInput | StorageError, QueueRepo.QueueRepo>
  readonly enqueueMany: (
    items: ReadonlyArray<{ readonly payload: A } & QueueRepo.EnqueueOptions>
  ) => Effect.Effect<ReadonlyArray<QueueRepo.EnqueueResult>, InvalidInput | StorageError, QueueRepo.QueueRepo>
}

/**
 * A typed client for a handler's kind: a payload of the wrong type is a
 * compile error. An item enqueued without `maxAttempts` is stored without
 * one: the worker that runs it applies its handler's (so a worker with a
 * newer handler applies the newer budget). An enqueue without `onConflict`
 * takes the handler's (`Handler.Options.onConflict`), else "keep".
 */
export const client = <A, I, E, R, O, OI>(handler: Handler.Handler<A, I, E, R, O, OI>): Client<A> => {
  const encode = Schema.encodeEither(handler.payload)
  const encoded = (payload: A, index: number | null) =>
    Either.mapLeft(encode(payload), (error) =>
      new InvalidInput({
        field: "payload",
        reason: `${index === null ? "" : `item ${index}: `}does not match the schema of ${handler.kind}: ${
          ParseResult.TreeFormatter.formatErrorSync(error)
        }`
      }))
  // The kind's default for a held key, unless the enqueue gives its own.
  const defaultMode = handler.onConflict
  const withMode = <O extends QueueRepo.EnqueueOptions>(options: O): O =>
    defaultMode === undefined || options.onConflict !== undefined ? options : { ...options, onConflict: defaultMode }
  return {
    kind: handler.kind,
    enqueue: (payload, options) =>
      Effect.flatMap(encoded(payload, null), (json) =>
        Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue(handler.kind, json, withMode(options ?? {})))),
    enqueueMany: (items) =>
      Effect.forEach(items, (item, i) =>
        Effect.map(encoded(item.payload, i), (json): QueueRepo.EnqueueRequest => ({
          ...withMode(item),
          kind: handler.kind,
          payload: json
        }))).pipe(
          Effect.flatMap((requests) => Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueueMany(requests)))
        )
  }
}

/** What `attemptOrEnqueue` did. */
export type Attempted<A> =
  | { readonly _tag: "Done"; readonly value: A }
  | { readonly _tag: "Queued"; readonly result: QueueRepo.EnqueueResult; readonly error: string }

/**
 * The reference's "try at once, queue only on failure": runs `effect` now; if
 * it fails (or dies), queues the handler's item with `payload`, due after the
 * handler's first backoff delay unless `options` say otherwise. Fails only if
 * the item could not be queued.
 */
export const attemptOrEnqueue = <A, X, RX, P, I, E, R, O, OI>(
  effect: Effect.Effect<A, X, RX>,
  handler: Handler.Handler<P, I, E, R, O, OI>,
  payload: P,
  options?: QueueRepo.EnqueueOptions
): Effect.Effect<Attempted<A>, InvalidInput | StorageError, RX | QueueRepo.QueueRepo> =>
  Effect.matchCauseEffect(effect, {
    onSuccess: (value) => Effect.succeed({ _tag: "Done", value } as const),
    onFailure: (cause) =>
      Effect.gen(function*() {
        const delay = options?.delay !== undefined || options?.runAt !== undefined
          ? options?.delay
          : yield* Backoff.delayFor(handler.backoff ?? Backoff.defaultPolicy, 1)
        const result = yield* client(handler).enqueue(payload, { ...options, delay })
        const decision = decide(cause)
        const error = decision._tag === "Done" ? "" : decision.error
        yield* Effect.logInfo(`docket: ${handler.kind} failed at once; queued for retry`)
        return { _tag: "Queued", result, error } as const
      })
  })
