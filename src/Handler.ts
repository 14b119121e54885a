/**
 * A handler: how items of one kind are run. It names the kind, the payload's
 * Schema (items are decoded with it before `run`; enqueues through
 * `Docket.client` are encoded and checked with it) and per-kind options.
 *
 * @example
 * ```ts
 * const SendEmail = Handler.make("email.send", {
 *   payload: Schema.Struct({ to: Schema.String, subject: Schema.String }),
 *   run: (mail, job) => Mailer.send(mail).pipe(Effect.mapError((e) => new Retry({ reason: e.message }))),
 *   maxAttempts: 8,
 *   timeout: "1 minute"
 * })
 * ```
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { Backoff } from "./Backoff.js"
import type { GlobalLimits, OnConflict, PerGroup } from "./Domain.js"
import { HANDLER_KEY_PREFIX } from "./internal/handlerKey.js"
import * as V from "./internal/validate.js"

/**
 * Snoozes an item of a kind may take when its handler sets no `maxSnoozes`
 * (100: over 8 hours of polling every 5 minutes; a handler that snoozes by
 * mistake every time stops after a hundred quick runs).
 */
export const DEFAULT_MAX_SNOOZES: number = V.DEFAULT_MAX_SNOOZES

/** What a handler is told about the item it runs. */
export interface Job {
  readonly id: number
  readonly kind: string
  /** This attempt's number, from 1. */
  readonly attempt: number
  /** The item's budget: its own, else this handler's `maxAttempts`, else the queue's default (8). */
  readonly maxAttempts: number
  readonly key: string | null
  /** The item's group inside its kind (`EnqueueOptions.group`), or null. */
  readonly group: string | null
  readonly priority: number
  /** When the item was enqueued (epoch ms, database clock). */
  readonly createdAt: number
  /**
   * When this attempt was due (epoch ms): the enqueue's due time on the first
   * attempt (for a recurring item, its tick), moved by a retry's backoff or a
   * snooze. `Recurring.tickOf(job)` gives a recurring item's tick on every attempt.
   */
  readonly runAt: number
  /** The previous attempt's error, if any. */
  readonly lastError: string | null
  /** When this attempt's claim took the item (epoch ms, database clock). */
  readonly claimedAt: number
  /**
   * How many times the item was snoozed before this run (the `Snooze`
   * outcome; a snooze does not count as an attempt, so `attempt` stays).
   */
  readonly snoozes: number
  readonly worker: string
  /**
   * Aborted when the run is interrupted (shutdown past its grace, lease lost,
   * timeout, the item cancelled), for promise-based code; Effect code is
   * interrupted directly.
   */
  readonly signal: AbortSignal
}

/**
 * What defines a handler besides its kind: the payload Schema, `run`, and
 * per-kind options. `O` is what `run` returns: with a `result` Schema, the
 * value kept with the done item (`OI` its encoded, JSON form); without one,
 * whatever `run` returns is not kept (void for most handlers).
 */
export interface Options<A, I, E, R, O = void, OI = O> {
  readonly payload: Schema.Schema<A, I, never>
  readonly run: (payload: A, job: Job) => Effect.Effect<O, E, R>
  /**
   * Keeps what `run` returns with the done item (its `result`, shown by
   * `docket show` and `QueueRepo.get`), encoded with this Schema to JSON, at
   * most the queue's `maxResultBytes` (64 KiB by default). A value that does
   * not encode (`ResultInvalid`) or is too large (`ResultTooLarge`) makes the
   * item dead at once: the work has run, and a retry would run it again.
   * Without it the returned value is dropped.
   */
  readonly result?: Schema.Schema<O, OI, never> | undefined
  /**
   * Attempts before an item of this kind is dead (default: the queue's
   * default, 8), for every item enqueued without its own `maxAttempts`,
   * whoever enqueued it (a client, `QueueRepo.enqueue`, `docket enqueue`): the
   * worker running this handler applies it when it claims the item. An
   * integer from 1 to 10,000.
   */
  readonly maxAttempts?: number | undefined
  /** Backoff between attempts (default: 30 s doubling to 1 h, with jitter). */
  readonly backoff?: Backoff | undefined
  /** A run longer than this is interrupted and retried. */
  readonly timeout?: Duration.DurationInput | undefined
  /** At most this many items of this kind run at once in one worker process. */
  readonly concurrency?: number | undefined
  /**
   * Limits across every worker process (`{ concurrency, rate }`, e.g.
   * `{ rate: { limit: 100, period: "1 minute" } }`), stored in the database
   * when a pool running this handler starts, unless a person set the kind's
   * limits (`docket kind set`): a person's setting answers what the code
   * cannot know (a provider throttling today), so a deploy or a restart must
   * not undo it; `docket kind reset` hands the kind back to its code.
   */
  readonly global?: GlobalLimits | undefined
  /**
   * Limits on each group of this kind (items enqueued with a `group`), across
   * every worker process: `{ concurrency: 1, ordered: true }` runs a group's
   * items one at a time in enqueue order, the next only once the previous is
   * finished (through its retries). Stored in the database when a pool
   * running this handler starts (the last pool to start wins); a handler
   * without it clears what an earlier one declared. A concurrency that is not
   * an integer from 1 to 10,000 stops the pool from starting (`InvalidInput`
   * on `perGroup`). Items of a kind with `perGroup` are not prefetched (as a
   * kind with global limits), and claims take its groups round-robin.
   */
  readonly perGroup?: PerGroup | undefined
  /**
   * Runs each item's handler inside one transaction of the queue's database,
   * and writes the item's completion in that same transaction, fenced by its
   * claim: the handler's own writes (through the `SqlClient` it is given, on
   * the queue's database) and the item's `done` commit together or not at
   * all. A failure, a crash, a lost lease or a cancel leaves none of the
   * handler's writes, so a message changes an actor's state exactly once
   * however often its item runs. It costs a pool connection held for the
   * run (the pool caps such runs at once: `Worker.Options.transactions`) and
   * a completion of its own instead of a batched one; on SQLite the run
   * holds the file's write lock (keep it short). docs/concepts.md,
   * "Transactional handlers".
   */
  readonly transactional?: boolean | undefined
  /**
   * Snoozes an item of this kind may take (default 100, `DEFAULT_MAX_SNOOZES`):
   * a `Snooze` of an item snoozed this many times already is dead instead,
   * with `SnoozeLimit`, so a handler that keeps snoozing cannot hold an item
   * for ever. An integer from 0 (a Snooze is dead at once) to 1,000,000; any
   * other value stops the pool from starting (an `InvalidInput` on
   * `maxSnoozes`).
   */
  readonly maxSnoozes?: number | undefined
  /**
   * What an enqueue of this kind through `Docket.client(handler)` does when
   * its `key` is held by a waiting item, unless the enqueue gives its own
   * `onConflict`: "keep" (the default: the waiting item stays), "replace",
   * "debounce" or "replaceRunning" (see `QueueRepo.OnConflict`). Enqueues
   * through `QueueRepo` directly (and `docket enqueue`) give their own.
   */
  readonly onConflict?: OnConflict | undefined
}

/**
 * A handler for one kind. `A` is the payload's type, `I` its encoded (JSON)
 * form; `O` and `OI` its result's (see `Options.result`).
 */
export interface Handler<A, I, E, R, O = void, OI = O> extends Options<A, I, E, R, O, OI> {
  readonly kind: string
}

/**
 * Any handler, for collections of handlers of different kinds. (`any` is the
 * existential here, as in Effect's own `Schema.Any`: a payload type is
 * invariant, so no other type admits every handler.)
 */
export type Any = Handler<any, any, any, any, any, any>

type IsAny<T> = 0 extends 1 & T ? true : false

/** The services a collection of handlers needs (none for the untyped `Any`). */
export type Requirements<H extends Any> = H extends Handler<infer _A, infer _I, infer _E, infer R, infer _O, infer _OI>
  ? IsAny<R> extends true ? never : R
  : never

/** The payload type of a handler. */
export type Payload<H extends Any> = H extends Handler<infer A, infer _I, infer _E, infer _R, infer _O, infer _OI> ? A
  : never

/** The result type of a handler (void for one without a `result` Schema). */
export type Result<H extends Any> = H extends Handler<infer _A, infer _I, infer _E, infer _R, infer O, infer _OI> ? O
  : never

/**
 * Defines the handler of a kind. With a `result` Schema, `run` must return
 * its type (and the handler's type carries it); without one, `run` returns
 * what it likes, nothing is kept, and the handler is a `Handler<A, I, E, R>`
 * as before results existed.
 */
export function make<A, I, E, R, O, OI>(
  kind: string,
  options: Options<A, I, E, R, O, OI> & { readonly result: Schema.Schema<O, OI, never> }
): Handler<A, I, E, R, O, OI>
export function make<A, I, E, R>(kind: string, options: Options<A, I, E, R>): Handler<A, I, E, R>
// The implementation's signature is not part of the type (the overloads are).
export function make(kind: string, options: Options<any, any, any, any, any, any>): Any {
  return { kind, ...options }
}

/**
 * A handler from a plain async function (for task files and JavaScript users):
 * the payload is taken as it is (any JSON), and a throw or rejection is a
 * retry, unless what is thrown is one of Docket's outcomes (`Permanent`,
 * `Cancel`: dead at once; `Snooze`: waiting again, attempt not counted;
 * `Retry` with its delay). What the function returns (resolves to) is kept
 * with the done item as it is, as JSON (undefined: none); one JSON cannot hold
 * (a BigInt, a cycle) or too large makes the item dead (see `Options.result`).
 */
export const fromPromise = (
  kind: string,
  run: (payload: unknown, job: Job, tx: Transaction) => Promise<unknown> | unknown,
  options: Omit<Options<unknown, unknown, never, never>, "payload" | "run" | "result"> = {}
): Handler<unknown, unknown, unknown, never, unknown, unknown> => ({
  kind,
  ...options,
  payload: Schema.Unknown,
  // The value as it is: JSON.stringify is its encoding (checked by the pool).
  result: Schema.Unknown,
  run: options.transactional === true
    ? (payload, job) =>
      Effect.flatMap(Effect.context<never>(), (context) =>
        Effect.tryPromise({ try: async () => await run(payload, job, transactionIn(context)), catch: (error) => error }))
    : (payload, job) =>
      Effect.tryPromise({ try: async () => await run(payload, job, NO_TRANSACTION), catch: (error) => error })
})

/**
 * What a plain-function handler (`fromPromise`, a task file) is given as its
 * third argument: with `transactional: true`, statements run in the
 * transaction that completes its item (`Options.transactional`), on the
 * queue's database, with that database's own placeholders (`$1` on
 * PostgreSQL, `?` on SQLite); without it, `query` fails.
 */
export interface Transaction {
  readonly query: <Row extends object = Record<string, unknown>>(
    text: string,
    params?: ReadonlyArray<unknown>
  ) => Promise<Array<Row>>
}

const NO_TRANSACTION: Transaction = {
  query: () => Promise.reject(new Error("docket: tx.query needs the handler's transactional: true"))
}

// Statements on the run's own context: inside the item's transaction, @effect/sql
// finds its connection there (the client is the pool's, the queue's database).
const transactionIn = (context: Context.Context<never>): Transaction => ({
  query: <Row extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
    Effect.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Row>(text, params)).pipe(
        Effect.map((rows) => [...rows]),
        Effect.provide(context as Context.Context<SqlClient.SqlClient>)
      )
    )
})

/**
 * A handler provided as a service of its own (one per kind), with the
 * services it needs already provided: what `Handler.layer` puts in context and
 * the worker pool collects.
 */
export interface Registered {
  readonly handler: Handler<unknown, unknown, unknown, never, unknown, unknown>
}

/** The service tag of a kind's handler. */
export const tag = (kind: string): Context.Tag<Registered, Registered> =>
  Context.GenericTag<Registered>(`${HANDLER_KEY_PREFIX}${kind}`)

/**
 * A kind's handler as a layer: the handler becomes a service of its own, built
 * with the services it needs (so the layer requires them). A worker pool built
 * where such layers are provided runs their kinds, beside any handlers given
 * to it directly:
 *
 * ```ts
 * const Handlers = Layer.mergeAll(Handler.layer(SendEmail), Handler.layer(RefreshMirror))
 * const Live = Worker.layer({ handlers: [] }).pipe(Layer.provide(Handlers), Layer.provide(MailerLive), ...)
 * ```
 */
export const layer = <A, I, E, R, O = void, OI = O>(
  handler: Handler<A, I, E, R, O, OI>
): Layer.Layer<Registered, never, R> =>
  Layer.effect(
    tag(handler.kind),
    Effect.map(Effect.context<R>(), (context): Registered => ({
      handler: {
        ...handler,
        payload: handler.payload as unknown as Schema.Schema<unknown, unknown, never>,
        result: handler.result as unknown as Schema.Schema<unknown, unknown, never> | undefined,
        run: (payload, job) => Effect.provide(handler.run(payload as A, job), context)
      }
    }))
  )
