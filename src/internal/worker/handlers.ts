/**
 * The pool's handlers by kind: those given in the options and those provided
 * as services by `Handler.layer`, each with its payload decoder, its result
 * encoder (when it keeps its result), its
 * per-process concurrency limit, its budget of attempts and its cap on snoozes.
 */
import type * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { GlobalLimits, PerGroup } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type * as Handler from "../../Handler.js"
import { checkLimits, checkPerGroup } from "../store/kinds.js"
import { HANDLER_KEY_PREFIX } from "../handlerKey.js"
import { checkMaxSnoozes, DEFAULT_MAX_SNOOZES, EncodedResult, encodeResult, MAX_ATTEMPTS_LIMIT } from "../validate.js"

/** The handlers provided as services (by `Handler.layer`) in a context. */
export const registered = (context: Context.Context<never>): ReadonlyArray<Handler.Any> => {
  const found: Array<Handler.Any> = []
  for (const [key, value] of context.unsafeMap) {
    if (key.startsWith(HANDLER_KEY_PREFIX)) found.push((value as Handler.Registered).handler)
  }
  return found
}

/** Decodes a stored payload (JSON text) for one kind: the value, or why not. */
export type Decoder = (json: string) => Either.Either<unknown, string>

// JSON.parse, then the schema (half the cost of Schema.parseJson's one transformation).
const decoderOf = (handler: Handler.Any): Decoder => {
  const decode = Schema.decodeUnknownEither(handler.payload)
  return (json) => {
    let value: unknown
    try {
      value = JSON.parse(json)
    } catch (e) {
      return Either.left(`the stored payload is not JSON: ${e instanceof Error ? e.message : String(e)}`)
    }
    // A Right as it is (Either.mapLeft would copy it and make a closure per item).
    const decoded = decode(value)
    // (A Right holds no error: its error type is only a type.)
    return Either.isRight(decoded) ? (decoded as Either.Either<unknown, never>) : Either.left(decoded.left.message)
  }
}

/**
 * Encodes a run's value for its done item: its JSON text, ready for the store
 * (an `EncodedResult`; undefined for none), or the error text that makes the item dead (`ResultInvalid: ...`,
 * `ResultTooLarge: ...`).
 */
export type Encoder = (value: unknown) => Either.Either<unknown, string>

// The handler's `result` Schema, then the JSON check the storage applies (so
// a result the storage would refuse is known here, per item, and never
// refuses a whole batch of completions). Checked whatever the retention: an
// item's outcome must not depend on how long a deployment keeps done items.
const encoderOf = (handler: Handler.Any, maxBytes: number): Encoder | undefined => {
  if (handler.result === undefined) return undefined
  const encode = Schema.encodeUnknownEither(handler.result as Schema.Schema<unknown, unknown, never>)
  return (value) => {
    const encoded = encode(value)
    if (Either.isLeft(encoded)) {
      return Either.left(`ResultInvalid: the result does not match the result schema of ${handler.kind}: ${encoded.left.message}`)
    }
    const json = encodeResult(encoded.right, maxBytes)
    if (Either.isLeft(json)) {
      const tag = /larger than/.test(json.left.reason) ? "ResultTooLarge" : "ResultInvalid"
      return Either.left(`${tag}: the result ${json.left.reason}`)
    }
    // Its JSON text travels to the store, which keeps it without encoding it again.
    return Either.right(json.right === null ? undefined : new EncodedResult(json.right))
  }
}

/** The handlers of one pool, looked up by kind. */
export interface HandlerTable {
  readonly byKind: ReadonlyMap<string, Handler.Any>
  readonly decoders: ReadonlyMap<string, Decoder>
  /** The kinds whose handler keeps its result (a `result` Schema, or a plain task), and their encoders. */
  readonly encoders: ReadonlyMap<string, Encoder>
  /** Kinds with a per-process concurrency limit, and the limit. */
  readonly kindLimits: ReadonlyMap<string, number>
  /** Kinds whose handler gives `maxAttempts`, and the budget (for items enqueued without one). */
  readonly maxAttempts: ReadonlyMap<string, number>
  /** Every kind's declared global limits (empty for none: a pool start clears limits an earlier code declared). */
  readonly globalLimits: ReadonlyMap<string, GlobalLimits>
  /** Every kind's declared group limits (undefined for none: a pool start clears what an earlier code declared). */
  readonly perGroup: ReadonlyMap<string, PerGroup | undefined>
  /** Every kind's cap on snoozes: its handler's `maxSnoozes`, else DEFAULT_MAX_SNOOZES. */
  readonly maxSnoozes: ReadonlyMap<string, number>
}

/**
 * The table; two handlers for one kind, a `maxAttempts` that is not an
 * integer from 1 to 10,000, invalid `global` limits, or a `maxSnoozes` that
 * is not one from 0 to 1,000,000, are programming errors (thrown; a bad
 * `maxSnoozes` as the typed `InvalidInput` on that field, naming the kind).
 */
export const table = (
  given: ReadonlyArray<Handler.Any>,
  context: Context.Context<never>,
  maxResultBytes: number
): HandlerTable => {
  const byKind = new Map<string, Handler.Any>()
  for (const handler of [...given, ...registered(context)]) {
    if (byKind.has(handler.kind)) throw new Error(`Docket worker: two handlers for kind ${handler.kind}`)
    byKind.set(handler.kind, handler)
  }
  const decoders = new Map([...byKind].map(([kind, h]) => [kind, decoderOf(h)] as const))
  const encoders = new Map<string, Encoder>()
  for (const [kind, h] of byKind) {
    const encoder = encoderOf(h, maxResultBytes)
    if (encoder !== undefined) encoders.set(kind, encoder)
  }
  const kindLimits = new Map(
    [...byKind].flatMap(([kind, h]) => (h.concurrency === undefined ? [] : [[kind, h.concurrency] as const]))
  )
  const maxAttempts = new Map<string, number>()
  for (const [kind, h] of byKind) {
    if (h.maxAttempts === undefined) continue
    if (!Number.isSafeInteger(h.maxAttempts) || h.maxAttempts < 1 || h.maxAttempts > MAX_ATTEMPTS_LIMIT) {
      throw new Error(`Docket worker: the handler of ${kind}: maxAttempts must be an integer from 1 to ${MAX_ATTEMPTS_LIMIT}`)
    }
    maxAttempts.set(kind, h.maxAttempts)
  }
  const globalLimits = new Map<string, GlobalLimits>()
  for (const [kind, h] of byKind) {
    const checked = checkLimits(h.global ?? {})
    if (Either.isLeft(checked)) throw new Error(`Docket worker: the handler of ${kind}: global ${checked.left.message}`)
    globalLimits.set(kind, h.global ?? {})
  }
  const perGroup = new Map<string, PerGroup | undefined>()
  for (const [kind, h] of byKind) {
    const checked = checkPerGroup(h.perGroup)
    if (Either.isLeft(checked)) {
      throw new InvalidInput({ field: "perGroup", reason: `the handler of ${kind}: ${checked.left.reason}` })
    }
    perGroup.set(kind, h.perGroup)
  }
  const maxSnoozes = new Map<string, number>()
  for (const [kind, h] of byKind) {
    const checked = checkMaxSnoozes(h.maxSnoozes ?? DEFAULT_MAX_SNOOZES)
    if (Either.isLeft(checked)) {
      throw new InvalidInput({ field: "maxSnoozes", reason: `the handler of ${kind}: ${checked.left.reason}` })
    }
    maxSnoozes.set(kind, checked.right)
  }
  return { byKind, decoders, encoders, kindLimits, maxAttempts, maxSnoozes, globalLimits, perGroup }
}
