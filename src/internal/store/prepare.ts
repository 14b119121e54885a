/**
 * Checking and encoding an enqueue request: the row an insert writes, or a
 * typed `InvalidInput` naming the field (and, in a bulk enqueue, the item).
 */
import { Either } from "effect"
import type { EnqueueRequest } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type { InsertRow } from "../dialect.js"
import * as V from "../validate.js"

/** Checks and encodes one request; `index` is its place in a bulk enqueue (null for a single one). */
export type Prepare = (request: EnqueueRequest, index: number | null) => Either.Either<InsertRow, InvalidInput>

/** What `prepare` checks against and fills in. */
export interface Limits {
  /** Largest accepted payload, as JSON bytes. */
  readonly maxPayloadBytes: number
}

/**
 * The `prepare` function for these limits. It is synchronous, Either-based: in
 * a bulk enqueue it runs once per item, and an Effect per check cost 40% of
 * the whole enqueue.
 */
export const make = ({ maxPayloadBytes }: Limits): Prepare => (request, index) => {
  const fail = (error: InvalidInput) =>
    Either.left(index === null ? error : new InvalidInput({ field: error.field, reason: `item ${index}: ${error.reason}` }))
  const kind = V.checkKind(request.kind)
  if (Either.isLeft(kind)) return fail(kind.left)
  const payload = V.encodePayload(request.payload, maxPayloadBytes)
  if (Either.isLeft(payload)) return fail(payload.left)
  const key = V.checkKey(request.key)
  if (Either.isLeft(key)) return fail(key.left)
  if (request.delay !== undefined && request.runAt !== undefined) {
    return fail(new InvalidInput({ field: "delay", reason: "give delay or runAt, not both" }))
  }
  let delayMs = 0
  if (request.delay !== undefined) {
    const checked = V.checkMillis("delay", request.delay, 0, V.MAX_DELAY_MS)
    if (Either.isLeft(checked)) return fail(checked.left)
    delayMs = checked.right
  }
  let runAt: number | null = null
  if (request.runAt !== undefined) {
    const checked = V.checkRunAt(request.runAt)
    if (Either.isLeft(checked)) return fail(checked.left)
    runAt = checked.right
  }
  let priority = 0
  if (request.priority !== undefined) {
    const checked = V.checkIntegerIn("priority", request.priority, -V.MAX_PRIORITY, V.MAX_PRIORITY)
    if (Either.isLeft(checked)) return fail(checked.left)
    priority = checked.right
  }
  // Not given: null, and the claimer decides (the kind's handler, else the default).
  let maxAttempts: number | null = null
  if (request.maxAttempts !== undefined) {
    const checked = V.checkIntegerIn("maxAttempts", request.maxAttempts, 1, V.MAX_ATTEMPTS_LIMIT)
    if (Either.isLeft(checked)) return fail(checked.left)
    maxAttempts = checked.right
  }
  return Either.right({ kind: kind.right, payload: payload.right, key: key.right, priority, runAt, delayMs, maxAttempts })
}
