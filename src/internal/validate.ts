/**
 * Input checks shared by every dialect. Each returns a typed `InvalidInput`
 * before any statement is sent, so bad input changes nothing.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { InvalidInput, type InvalidField } from "../Errors.js"

/** Longest kind, in characters. */
export const KIND_MAX_LENGTH = 128
/** Longest dedupe key, in characters. */
export const KEY_MAX_LENGTH = 512
/** Longest worker name, in characters. */
/** Longest group name (the group of an item inside its kind: `EnqueueOptions.group`). */
export const GROUP_MAX_LENGTH = 512
/** The most items of one group a kind's `perGroup.concurrency` may allow at once. */
export const MAX_GROUP_CONCURRENCY = 10_000
export const WORKER_MAX_LENGTH = 255
/** Longest error text kept (longer ones are cut). */
export const ERROR_MAX_LENGTH = 16_384
/** Longest cancel reason, in characters. */
export const REASON_MAX_LENGTH = 1000
/** The most ids one cancel may name. */
export const MAX_CANCEL_IDS = 10_000
/** The most items one claim may ask for. */
export const MAX_CLAIM_LIMIT = 10_000
/** The largest attempt budget. */
export const MAX_ATTEMPTS_LIMIT = 10_000
/**
 * Snoozes allowed per item when its handler sets no `maxSnoozes`. A hundred:
 * room for the polling a snooze is for (every 5 minutes for over 8 hours,
 * every 10 seconds for a quarter of an hour) while a handler that snoozes by
 * mistake on every run (a condition that never becomes true, a delay of 0)
 * stops within a hundred quick runs instead of running for ever; a kind that
 * polls longer says so with its own `maxSnoozes`.
 */
export const DEFAULT_MAX_SNOOZES = 100
/**
 * The largest `maxSnoozes`: a million snoozes of a second are eleven days;
 * past that a limit is a typo (and the column is a 32-bit integer).
 */
export const MAX_SNOOZES_LIMIT = 1_000_000
/** Priorities are 32-bit integers in the schema: from -MAX_PRIORITY to MAX_PRIORITY. */
export const MAX_PRIORITY = 2_147_483_647
/** About 100 years: far enough for any schedule, small enough to stay exact in a double. */
export const MAX_DELAY_MS = 100 * 365 * 24 * 3600 * 1000
/** The longest lease (7 days). */
export const MAX_LEASE_MS = 7 * 24 * 3600 * 1000
/** The default largest payload, as JSON bytes (1 MiB). */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

const KIND_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/

const invalid = (field: InvalidField, reason: string) => Either.left(new InvalidInput({ field, reason }))

/** A kind: a non-empty string of letters, digits and _ . : -, at most KIND_MAX_LENGTH long. */
export const checkKind = (kind: unknown): Either.Either<string, InvalidInput> => {
  if (typeof kind !== "string") return invalid("kind", "must be a string")
  if (kind.length === 0) return invalid("kind", "must not be empty")
  if (kind.length > KIND_MAX_LENGTH) return invalid("kind", `must be at most ${KIND_MAX_LENGTH} characters`)
  if (!KIND_PATTERN.test(kind)) {
    return invalid("kind", "may hold only letters, digits and _ . : - (and must start with a letter or digit)")
  }
  return Either.right(kind)
}

/** A dedupe key, or none: a non-empty well-formed string without NUL, at most KEY_MAX_LENGTH long. */
export const checkKey = (key: unknown): Either.Either<string | null, InvalidInput> => {
  if (key === undefined || key === null) return Either.right(null)
  if (typeof key !== "string") return invalid("key", "must be a string")
  if (key.length === 0) return invalid("key", "must not be empty (leave it out for no dedupe)")
  if (key.length > KEY_MAX_LENGTH) return invalid("key", `must be at most ${KEY_MAX_LENGTH} characters`)
  if (key.includes("\u0000")) return invalid("key", "must not contain NUL characters")
  if (!key.isWellFormed()) return invalid("key", "must be well-formed Unicode (no lone surrogates)")
  return Either.right(key)
}

/**
 * Every `OnConflict` mode (Domain.ts), in the order the docs list them (the
 * type is read from here, not imported: Domain.ts imports this module).
 */
export const ON_CONFLICT_MODES = ["keep", "replace", "debounce", "replaceRunning"] as const
type OnConflict = (typeof ON_CONFLICT_MODES)[number]

/** What a second enqueue of a held key does (none given: "keep"). */
export const checkOnConflict = (mode: unknown): Either.Either<OnConflict, InvalidInput> => {
  if (mode === undefined || mode === null) return Either.right("keep")
  if (typeof mode === "string" && (ON_CONFLICT_MODES as ReadonlyArray<string>).includes(mode)) {
    return Either.right(mode as OnConflict)
  }
  return invalid("onConflict", `must be one of ${ON_CONFLICT_MODES.join(", ")}`)
}

/** Checks a group name (none: null). Stored as group_key; named `group` everywhere a person reads it. */
export const checkGroup = (group: unknown): Either.Either<string | null, InvalidInput> => {
  if (group === undefined || group === null) return Either.right(null)
  if (typeof group !== "string") return invalid("group", "must be a string")
  if (group.length === 0) return invalid("group", "must not be empty (leave it out for no group)")
  if (group.length > GROUP_MAX_LENGTH) return invalid("group", `must be at most ${GROUP_MAX_LENGTH} characters`)
  if (group.includes("\u0000")) return invalid("group", "must not contain NUL characters")
  if (!group.isWellFormed()) return invalid("group", "must be well-formed Unicode (no lone surrogates)")
  return Either.right(group)
}

class NotJson extends Error {}

const strictReplacer = (_key: string, value: unknown): unknown => {
  switch (typeof value) {
    case "number":
      if (!Number.isFinite(value)) throw new NotJson(`${value} is not a JSON number`)
      return value
    case "function":
    case "symbol":
      throw new NotJson(`a ${typeof value} is not JSON`)
    default:
      return value
  }
}

/** Encodes a payload as JSON text; refuses what JSON would silently change or cannot hold. */
export const encodePayload = (
  payload: unknown,
  maxBytes: number
): Either.Either<string, InvalidInput> =>
  payload === undefined
    ? invalid("payload", "must not be undefined (use null or {} for none)")
    : encodeJson("payload", payload, maxBytes)

/** The default largest result, as JSON bytes (64 KiB: a summary, an id, a URL; not a file). */
export const DEFAULT_MAX_RESULT_BYTES = 64 * 1024

/**
 * Encodes a handler's result as JSON text (undefined: none, null); refuses
 * what JSON cannot hold and what is larger than `maxBytes`, as the payload.
 */
export const encodeResult = (result: unknown, maxBytes: number): Either.Either<string | null, InvalidInput> =>
  result === undefined
    ? Either.right(null)
    : result instanceof EncodedResult
    ? Either.right(result.json)
    : encodeJson("result", result, maxBytes)

/**
 * A result a worker pool has already encoded and checked against the same
 * limit (internal/worker/handlers.ts): the store keeps its JSON text as it
 * is instead of serialising the value a second time.
 */
export class EncodedResult {
  constructor(readonly json: string) {}
}

const encodeJson = (field: "payload" | "result", value: unknown, maxBytes: number): Either.Either<string, InvalidInput> => {
  let json: string | undefined
  try {
    json = JSON.stringify(value, strictReplacer)
  } catch (error) {
    const reason = error instanceof NotJson
      ? error.message
      : error instanceof RangeError
      ? "is nested too deeply to encode"
      : `is not JSON-serialisable (${error instanceof Error ? error.message : String(error)})`
    return invalid(field, reason)
  }
  if (json === undefined) return invalid(field, "is not JSON-serialisable")
  // Byte length only matters near the limit; a string of N UTF-16 units is at most 3N UTF-8 bytes.
  if (json.length * 3 > maxBytes && Buffer.byteLength(json, "utf8") > maxBytes) {
    return invalid(field, `is larger than ${maxBytes} bytes as JSON`)
  }
  return Either.right(json)
}

const isInteger = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value)

/** A safe integer from `min` to `max`. */
export const checkIntegerIn = (
  field: InvalidField,
  value: unknown,
  min: number,
  max: number
): Either.Either<number, InvalidInput> =>
  isInteger(value) && value >= min && value <= max
    ? Either.right(value)
    : invalid(field, `must be an integer from ${min} to ${max} (got ${describe(value)})`)

/** A kind's `maxSnoozes`: an integer from 0 (never snoozed: a Snooze is dead at once) to MAX_SNOOZES_LIMIT. */
export const checkMaxSnoozes = (value: unknown): Either.Either<number, InvalidInput> =>
  checkIntegerIn("maxSnoozes", value, 0, MAX_SNOOZES_LIMIT)

/** A delay or lease as a `Duration` input or a number of milliseconds. */
export const checkMillis = (
  field: InvalidField,
  value: unknown,
  min: number,
  max: number
): Either.Either<number, InvalidInput> => {
  let ms: number
  if (typeof value === "number") {
    ms = value
  } else {
    const decoded = Duration.decodeUnknown(value)
    if (decoded._tag === "None") return invalid(field, `must be a duration or a number of milliseconds (got ${describe(value)})`)
    ms = Duration.toMillis(decoded.value)
  }
  if (!Number.isFinite(ms) || ms < min || ms > max) {
    return invalid(field, `must be from ${min} to ${max} milliseconds (got ${describe(value)})`)
  }
  return Either.right(Math.round(ms))
}

/** A due time: a valid Date or epoch milliseconds. */
export const checkRunAt = (value: unknown): Either.Either<number, InvalidInput> => {
  const ms = value instanceof Date ? value.getTime() : value
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0 || ms > 8.64e15) {
    return invalid("runAt", `must be a valid Date or epoch milliseconds (got ${describe(value)})`)
  }
  return Either.right(Math.round(ms))
}

/** A worker name. */
export const checkWorker = (worker: unknown): Either.Either<string, InvalidInput> =>
  typeof worker === "string" && worker.length > 0 && worker.length <= WORKER_MAX_LENGTH && !worker.includes("\u0000") && worker.isWellFormed()
    ? Either.right(worker)
    : invalid("worker", `must be a non-empty name of at most ${WORKER_MAX_LENGTH} characters`)

/** A cancel's reason, or none: a non-empty well-formed string without NUL, at most REASON_MAX_LENGTH long. */
export const checkReason = (reason: unknown): Either.Either<string | null, InvalidInput> => {
  if (reason === undefined) return Either.right(null)
  if (typeof reason !== "string") return invalid("reason", "must be a string")
  if (reason.trim().length === 0) return invalid("reason", "must not be empty (leave it out for none)")
  if (reason.length > REASON_MAX_LENGTH) return invalid("reason", `must be at most ${REASON_MAX_LENGTH} characters`)
  if (reason.includes("\u0000")) return invalid("reason", "must not contain NUL characters")
  if (!reason.isWellFormed()) return invalid("reason", "must be well-formed Unicode (no lone surrogates)")
  return Either.right(reason)
}

/** Error text kept on the item: bounded, and without NUL (PostgreSQL text cannot hold it). */
export const normaliseError = (error: string): string => {
  const clean = error.includes("\u0000") ? error.replaceAll("\u0000", "\\u0000") : error
  const wellFormed = clean.isWellFormed() ? clean : clean.toWellFormed()
  return wellFormed.length > ERROR_MAX_LENGTH ? `${wellFormed.slice(0, ERROR_MAX_LENGTH)}… (truncated)` : wellFormed
}

const describe = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) {
    return String(value)
  }
  return typeof value
}

/** Lifts an `Either` of a check into an `Effect`. */
export const lift = <A>(either: Either.Either<A, InvalidInput>): Effect.Effect<A, InvalidInput> =>
  Either.isRight(either) ? Effect.succeed(either.right) : Effect.fail(either.left)
