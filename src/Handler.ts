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
import { Context, type Duration, Effect, Layer, Schema } from "effect"
import type { Backoff } from "./Backoff.js"
import { HANDLER_KEY_PREFIX } from "./internal/handlerKey.js"

/** What a handler is told about the item it runs. */
export interface Job {
  readonly id: number
  readonly kind: string
  /** This attempt's number, from 1. */
  readonly attempt: number
  /** The item's budget: its own, else this handler's `maxAttempts`, else the queue's default (8). */
  readonly maxAttempts: number
  readonly key: string | null
  readonly priority: number
  /** When the item was enqueued (epoch ms, database clock). */
  readonly createdAt: number
  /** The previous attempt's error, if any. */
  readonly lastError: string | null
  readonly worker: string
  /**
   * Aborted when the run is interrupted (shutdown past its grace, lease lost,
   * timeout, the item cancelled), for promise-based code; Effect code is
   * interrupted directly.
   */
  readonly signal: AbortSignal
}

/** What defines a handler besides its kind: the payload Schema, `run`, and per-kind options. */
export interface Options<A, I, E, R> {
  readonly payload: Schema.Schema<A, I, never>
  readonly run: (payload: A, job: Job) => Effect.Effect<void, E, R>
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
}

/** A handler for one kind. `A` is the payload's type, `I` its encoded (JSON) form. */
export interface Handler<A, I, E, R> extends Options<A, I, E, R> {
  readonly kind: string
}

/**
 * Any handler, for collections of handlers of different kinds. (`any` is the
 * existential here, as in Effect's own `Schema.Any`: a payload type is
 * invariant, so no other type admits every handler.)
 */
export type Any = Handler<any, any, any, any>

type IsAny<T> = 0 extends 1 & T ? true : false

/** The services a collection of handlers needs (none for the untyped `Any`). */
export type Requirements<H extends Any> = H extends Handler<infer _A, infer _I, infer _E, infer R>
  ? IsAny<R> extends true ? never : R
  : never

/** The payload type of a handler. */
export type Payload<H extends Any> = H extends Handler<infer A, infer _I, infer _E, infer _R> ? A : never

/** Defines the handler of a kind. */
export const make = <A, I, E, R>(kind: string, options: Options<A, I, E, R>): Handler<A, I, E, R> => ({
  kind,
  ...options
})

/**
 * A handler from a plain async function (for task files and JavaScript users):
 * the payload is taken as it is (any JSON), and a throw or rejection is a retry.
 */
export const fromPromise = (
  kind: string,
  run: (payload: unknown, job: Job) => Promise<unknown> | unknown,
  options: Omit<Options<unknown, unknown, never, never>, "payload" | "run"> = {}
): Handler<unknown, unknown, unknown, never> => ({
  kind,
  ...options,
  payload: Schema.Unknown,
  run: (payload, job) =>
    Effect.tryPromise({
      try: async () => {
        await run(payload, job)
      },
      catch: (error) => error
    })
})

/**
 * A handler provided as a service of its own (one per kind), with the
 * services it needs already provided: what `Handler.layer` puts in context and
 * the worker pool collects.
 */
export interface Registered {
  readonly handler: Handler<unknown, unknown, unknown, never>
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
export const layer = <A, I, E, R>(handler: Handler<A, I, E, R>): Layer.Layer<Registered, never, R> =>
  Layer.effect(
    tag(handler.kind),
    Effect.map(Effect.context<R>(), (context): Registered => ({
      handler: {
        ...handler,
        payload: handler.payload as unknown as Schema.Schema<unknown, unknown, never>,
        run: (payload, job) => Effect.provide(handler.run(payload as A, job), context)
      }
    }))
  )
