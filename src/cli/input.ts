/**
 * Reading the command's input: durations, JSON payloads, times and the lines
 * of a bulk (NDJSON) file. Every check runs before the database is opened, so
 * bad input writes nothing.
 */
import { Either } from "effect"
import * as V from "../internal/validate.js"
import type * as QueueRepo from "../QueueRepo.js"
import { usage, type UsageError } from "./errors.js"

// Days for retentions (7d, 30d): the other flags' bounds still apply to them.
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/

/** `500ms`, `30s`, `5m`, `1h` or a plain number of milliseconds; whole milliseconds. */
export const parseDuration = (name: string, text: string): Either.Either<number, UsageError> => {
  const trimmed = text.trim()
  if (/^-\s*\d/.test(trimmed)) return Either.left(usage(`${name} must not be negative (got "${text}")`))
  const match = DURATION.exec(trimmed)
  if (match === null) {
    return Either.left(
      usage(`${name}: "${text}" is not a duration (use 500ms, 30s, 5m, 1h, 7d or a number of milliseconds)`)
    )
  }
  const ms = Math.round(Number(match[1]) * UNITS[match[2] ?? "ms"])
  if (!Number.isSafeInteger(ms) || ms > V.MAX_DELAY_MS) return Either.left(usage(`${name}: "${text}" is too long`))
  return Either.right(ms)
}

/**
 * A rate as `N/DURATION` (`100/1m`, `20/1s`, `5/500ms`; a bare unit means one:
 * `100/m`). The numbers' ranges are checked where the rate is stored.
 */
export const parseRate = (name: string, text: string): Either.Either<{ readonly limit: number; readonly period: number }, UsageError> => {
  const match = /^\s*(\d+)\s*\/\s*(.+?)\s*$/.exec(text)
  if (match === null) {
    return Either.left(usage(`${name}: "${text}" is not a rate (use N/DURATION, e.g. 100/1m or 20/1s)`))
  }
  const period = /^[a-z]+$/.test(match[2]) ? `1${match[2]}` : match[2]
  return Either.map(parseDuration(name, period), (ms) => ({ limit: Number(match[1]), period: ms }))
}

/** Milliseconds as the shortest exact duration text `parseDuration` reads back: 24h, 1m, 30s, 500ms. */
export const readPeriod = (ms: number): string => {
  for (const [unit, size] of [["h", 3_600_000], ["m", 60_000], ["s", 1000]] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}

/** A duration in the bulk format: a number of milliseconds or a duration string. */
const durationValue = (name: string, value: unknown): Either.Either<number, UsageError> => {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return Either.left(usage(`${name} must be a finite number of milliseconds`))
    if (value < 0) return Either.left(usage(`${name} must not be negative (got ${value})`))
    return Either.right(Math.round(value))
  }
  if (typeof value === "string") return parseDuration(name, value)
  return Either.left(usage(`${name} must be a number of milliseconds or a duration string like "30s"`))
}

/** A positional argument that looks like an option is an unknown option, not data. */
export const looksLikeOption = (text: string): boolean => /^--?[A-Za-z]/.test(text)

/** The refusal of an argument that looks like an option (`--bogus=1` names `--bogus`). */
export const unknownOption = (text: string): UsageError => usage(`unknown option ${text.split("=")[0]}`)

/** The payload argument: any JSON value. */
export const parsePayload = (text: string): Either.Either<unknown, UsageError> => {
  if (looksLikeOption(text)) return Either.left(unknownOption(text))
  try {
    return Either.right(JSON.parse(text))
  } catch (error) {
    return Either.left(usage(`the payload is not valid JSON (${(error as Error).message})`))
  }
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i

/** An ISO 8601 time (`2030-01-01T09:00:00Z`); without an offset it is local time. */
export const parseTime = (name: string, text: string): Either.Either<Date, UsageError> => {
  const date = new Date(text)
  if (!ISO_TIME.test(text.trim()) || Number.isNaN(date.getTime())) {
    return Either.left(usage(`${name}: "${text}" is not an ISO 8601 time (like 2030-01-01T09:00:00Z)`))
  }
  return Either.right(date)
}

const lift = <A>(either: Either.Either<A, { readonly message: string }>): Either.Either<A, UsageError> =>
  Either.mapLeft(either, (error) => usage(error.message))

/**
 * Checks an enqueue request the way the queue will (kind, payload, key,
 * priority, attempts), so that a bad one is refused before anything is opened.
 */
export const checkRequest = (request: QueueRepo.EnqueueRequest): Either.Either<QueueRepo.EnqueueRequest, UsageError> =>
  Either.gen(function*() {
    yield* lift(V.checkKind(request.kind))
    yield* lift(V.encodePayload(request.payload, V.DEFAULT_MAX_PAYLOAD_BYTES))
    yield* lift(V.checkKey(request.key))
    if (request.priority !== undefined) {
      yield* lift(V.checkIntegerIn("priority", request.priority, -V.MAX_PRIORITY, V.MAX_PRIORITY))
    }
    if (request.maxAttempts !== undefined) {
      yield* lift(V.checkIntegerIn("maxAttempts", request.maxAttempts, 1, V.MAX_ATTEMPTS_LIMIT))
    }
    if (request.delay !== undefined && request.runAt !== undefined) {
      return yield* Either.left(usage("give a delay or a run-at time, not both"))
    }
    if (request.runAt !== undefined) yield* lift(V.checkRunAt(request.runAt))
    return request
  })

const BULK_FIELDS = new Set(["kind", "payload", "key", "delay", "runAt", "priority", "maxAttempts"])

/** One line of a bulk file: `{"kind":..,"payload":..,"key"?,"delay"?,"runAt"?,"priority"?,"maxAttempts"?}`. */
export const parseBulkLine = (line: string, lineNumber: number): Either.Either<QueueRepo.EnqueueRequest, UsageError> => {
  const at = (error: UsageError) => usage(`line ${lineNumber}: ${error.reason}`)
  return Either.mapLeft(
    Either.gen(function*() {
      let value: unknown
      try {
        value = JSON.parse(line)
      } catch (error) {
        return yield* Either.left(usage(`not valid JSON (${(error as Error).message})`))
      }
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        return yield* Either.left(usage(`must be a JSON object with "kind" and "payload"`))
      }
      const record = value as Record<string, unknown>
      const unknown = Object.keys(record).filter((k) => !BULK_FIELDS.has(k))
      if (unknown.length > 0) return yield* Either.left(usage(`unknown field ${JSON.stringify(unknown[0])}`))
      if (record.kind === undefined) return yield* Either.left(usage(`"kind" is missing`))
      const delay = record.delay === undefined || record.delay === null
        ? undefined
        : yield* durationValue("delay", record.delay)
      let runAt: Date | number | undefined
      if (typeof record.runAt === "string") runAt = yield* parseTime("runAt", record.runAt)
      else if (typeof record.runAt === "number") runAt = record.runAt
      else if (record.runAt !== undefined && record.runAt !== null) {
        return yield* Either.left(usage(`runAt must be an ISO 8601 time or epoch milliseconds`))
      }
      const request: QueueRepo.EnqueueRequest = {
        kind: record.kind as string,
        payload: record.payload === undefined ? null : record.payload,
        key: record.key === null ? undefined : (record.key as string | undefined),
        delay,
        runAt,
        priority: record.priority === null ? undefined : (record.priority as number | undefined),
        maxAttempts: record.maxAttempts === null ? undefined : (record.maxAttempts as number | undefined)
      }
      return yield* checkRequest(request)
    }),
    at
  )
}
