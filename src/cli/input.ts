/**
 * Reading the command's input: durations, JSON payloads, times and the lines
 * of a bulk (NDJSON) file. Every check runs before the database is opened, so
 * bad input writes nothing.
 */
import * as Either from "effect/Either"
import { InvalidInput } from "../Errors.js"
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

const refuse = (error: { readonly message: string }): Either.Either<never, UsageError> => Either.left(usage(error.message))

/**
 * The payload check for a value JSON.parse made: it holds nothing JSON cannot
 * (no NaN, function or undefined), so only its size is checked, without
 * encodePayload's replacer, which cost a third of a bulk line's checks.
 * The refusals are encodePayload's own.
 */
const parsedPayloadSize = (payload: unknown): Either.Either<string, InvalidInput> => {
  const max = V.DEFAULT_MAX_PAYLOAD_BYTES
  let json: string
  try {
    json = JSON.stringify(payload)
  } catch {
    return Either.left(new InvalidInput({ field: "payload", reason: "is nested too deeply to encode" }))
  }
  if (json.length * 3 > max && Buffer.byteLength(json, "utf8") > max) {
    return Either.left(new InvalidInput({ field: "payload", reason: `is larger than ${max} bytes as JSON` }))
  }
  return Either.right(json)
}

/**
 * Checks an enqueue request the way the queue will (kind, payload, key,
 * group, priority, attempts), so that a bad one is refused before anything is opened.
 * Plain code, not Either.gen: a bulk file runs it once per line
 * (`parsedFromJson`: its payload is a value JSON.parse made).
 */
export const checkRequest = (
  request: QueueRepo.EnqueueRequest,
  parsedFromJson = false
): Either.Either<QueueRepo.EnqueueRequest, UsageError> => {
  const kind = V.checkKind(request.kind)
  if (Either.isLeft(kind)) return refuse(kind.left)
  const payload = parsedFromJson ? parsedPayloadSize(request.payload) : V.encodePayload(request.payload, V.DEFAULT_MAX_PAYLOAD_BYTES)
  if (Either.isLeft(payload)) return refuse(payload.left)
  const key = V.checkKey(request.key)
  if (Either.isLeft(key)) return refuse(key.left)
  const onConflict = V.checkOnConflict(request.onConflict)
  if (Either.isLeft(onConflict)) return refuse(onConflict.left)
  const group = V.checkGroup(request.group)
  if (Either.isLeft(group)) return refuse(group.left)
  if (request.priority !== undefined) {
    const priority = V.checkIntegerIn("priority", request.priority, -V.MAX_PRIORITY, V.MAX_PRIORITY)
    if (Either.isLeft(priority)) return refuse(priority.left)
  }
  if (request.maxAttempts !== undefined) {
    const attempts = V.checkIntegerIn("maxAttempts", request.maxAttempts, 1, V.MAX_ATTEMPTS_LIMIT)
    if (Either.isLeft(attempts)) return refuse(attempts.left)
  }
  if (request.delay !== undefined && request.runAt !== undefined) {
    return Either.left(usage("give a delay or a run-at time, not both"))
  }
  if (request.runAt !== undefined) {
    const runAt = V.checkRunAt(request.runAt)
    if (Either.isLeft(runAt)) return refuse(runAt.left)
  }
  return Either.right(request)
}

const BULK_FIELDS = new Set(["kind", "payload", "key", "onConflict", "group", "delay", "runAt", "priority", "maxAttempts"])

/**
 * One line of a bulk file: `{"kind":..,"payload":..,"key"?,"onConflict"?,"group"?,"delay"?,"runAt"?,"priority"?,"maxAttempts"?}`.
 * `check: false` skips `checkRequest` (a line already checked by a first pass).
 */
export const parseBulkLine = (
  line: string,
  lineNumber: number,
  check = true
): Either.Either<QueueRepo.EnqueueRequest, UsageError> => {
  const request = bulkRequest(line)
  const checked = check && Either.isRight(request) ? checkRequest(request.right, true) : request
  return Either.isLeft(checked) ? Either.left(usage(`line ${lineNumber}: ${checked.left.reason}`)) : checked
}

const bulkRequest = (line: string): Either.Either<QueueRepo.EnqueueRequest, UsageError> => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch (error) {
    return Either.left(usage(`not valid JSON (${(error as Error).message})`))
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Either.left(usage(`must be a JSON object with "kind" and "payload"`))
  }
  const record = value as Record<string, unknown>
  for (const k in record) {
    if (!BULK_FIELDS.has(k)) return Either.left(usage(`unknown field ${JSON.stringify(k)}`))
  }
  if (record.kind === undefined) return Either.left(usage(`"kind" is missing`))
  let delay: number | undefined
  if (record.delay !== undefined && record.delay !== null) {
    const checked = durationValue("delay", record.delay)
    if (Either.isLeft(checked)) return Either.left(checked.left)
    delay = checked.right
  }
  let runAt: Date | number | undefined
  if (typeof record.runAt === "string") {
    const checked = parseTime("runAt", record.runAt)
    if (Either.isLeft(checked)) return Either.left(checked.left)
    runAt = checked.right
  } else if (typeof record.runAt === "number") runAt = record.runAt
  else if (record.runAt !== undefined && record.runAt !== null) {
    return Either.left(usage(`runAt must be an ISO 8601 time or epoch milliseconds`))
  }
  return Either.right({
    kind: record.kind as string,
    payload: record.payload === undefined ? null : record.payload,
    key: record.key === null ? undefined : (record.key as string | undefined),
    onConflict: record.onConflict === null ? undefined : (record.onConflict as QueueRepo.OnConflict | undefined),
    group: record.group === null ? undefined : (record.group as string | undefined),
    delay,
    runAt,
    priority: record.priority === null ? undefined : (record.priority as number | undefined),
    maxAttempts: record.maxAttempts === null ? undefined : (record.maxAttempts as number | undefined)
  })
}
