/**
 * The live-workers table: a worker pool's heartbeat (its registration is the
 * first), its removal, the removal of pools long silent, and the listing with
 * each pool's status. Input is checked before any statement (a typed
 * `InvalidInput`, nothing written); a pool's status is decided from its
 * heartbeat's age on the database's clock (sql/workers.ts).
 */
import { Effect, Either } from "effect"
import type { WorkerHeartbeat, WorkerInfo } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type { Dialect, HeartbeatRow } from "../dialect.js"
import { GONE_AFTER_MS } from "../liveness.js"
import { num, type WorkerRow } from "../rows.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** Longest pool id: a worker name and the random part the pool adds. */
export const POOL_ID_MAX_LENGTH = V.WORKER_MAX_LENGTH + 64
/** Longest host name or version kept (a DNS name is at most 253 characters). */
const LABEL_MAX_LENGTH = 255
/** The integer columns are 32-bit. */
const INT_MAX = 2_147_483_647
/** The latest time a Date can hold, in epoch ms. */
const TIME_MAX = 8_640_000_000_000_000

const invalid = (reason: string) => Either.left(new InvalidInput({ field: "pool", reason }))

const checkText = (property: string, value: unknown, max: number): Either.Either<string, InvalidInput> =>
  typeof value === "string" && value.length > 0 && value.length <= max && !value.includes("\u0000") &&
    value.isWellFormed()
    ? Either.right(value)
    : invalid(`${property} must be a non-empty text of at most ${max} characters`)

const checkInt = (property: string, value: unknown, min: number, max = INT_MAX): Either.Either<number, InvalidInput> =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= min && value <= max
    ? Either.right(value)
    : invalid(`${property} must be an integer from ${min} to ${max} (got ${String(value)})`)

/** A heartbeat checked and encoded for the dialect. */
const checkHeartbeat = (beat: WorkerHeartbeat) =>
  Effect.gen(function*() {
    const id = yield* V.lift(checkText("id", beat.id, POOL_ID_MAX_LENGTH))
    const name = yield* V.lift(checkText("name", beat.name, V.WORKER_MAX_LENGTH))
    const host = yield* V.lift(checkText("host", beat.host, LABEL_MAX_LENGTH))
    const version = yield* V.lift(checkText("version", beat.version, LABEL_MAX_LENGTH))
    const pid = yield* V.lift(checkInt("pid", beat.pid, 0))
    const concurrency = yield* V.lift(checkInt("concurrency", beat.concurrency, 1))
    const running = yield* V.lift(checkInt("running", beat.running, 0))
    if (beat.kinds !== null && !Array.isArray(beat.kinds)) {
      return yield* V.lift(invalid("kinds must be an array of kinds, or null for every kind"))
    }
    if (beat.kinds !== null) for (const kind of beat.kinds) yield* V.lift(V.checkKind(kind))
    const startedAt = beat.startedAt === undefined || beat.startedAt === null
      ? null
      : yield* V.lift(checkInt("startedAt", beat.startedAt, 0, TIME_MAX))
    return {
      id, name, host, pid, concurrency, running, version, startedAt,
      kinds: beat.kinds === null ? null : JSON.stringify(beat.kinds)
    } satisfies HeartbeatRow
  })

// A row another program wrote with kinds that are not a JSON array of text
// claims no kind that can be named (never "every kind").
const parseKinds = (text: string | null): ReadonlyArray<string> | null => {
  if (text === null) return null
  try {
    const value: unknown = JSON.parse(text)
    if (Array.isArray(value)) return value.filter((k): k is string => typeof k === "string")
  } catch {
    // unreadable: below
  }
  return []
}

/** A stored row as the pool it describes; gone when its heartbeat is older than `goneAfterMs`. */
export const toWorkerInfo = (row: WorkerRow, goneAfterMs: number): WorkerInfo => {
  const age = Math.max(0, num(row.age_ms))
  return {
    id: row.id,
    name: row.name,
    host: row.host,
    pid: num(row.pid),
    kinds: parseKinds(row.kinds),
    concurrency: num(row.concurrency),
    running: num(row.running),
    version: row.version,
    startedAt: num(row.started_at),
    heartbeatAt: num(row.heartbeat_at),
    heartbeatAgeMs: age,
    status: age > goneAfterMs ? "gone" : "live"
  }
}

// In code-unit order, not the database's collation: the same order on every
// dialect and machine (PostgreSQL's locale collations skip punctuation).
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
const byNameThenId = (a: WorkerInfo, b: WorkerInfo) => compare(a.name, b.name) || compare(a.id, b.id)

/** The operations on the live-workers table. */
export type Workers = Pick<Service, "heartbeatWorker" | "removeWorker" | "pruneWorkers" | "listWorkers">

/** The live-workers operations over a dialect. */
export const make = (dialect: Dialect): Workers => ({
  heartbeatWorker: (beat) =>
    checkHeartbeat(beat).pipe(
      Effect.flatMap((row) => Effect.mapError(dialect.heartbeatWorker(row), storage("heartbeatWorker"))),
      Effect.map((rows) => num(rows[0]?.started_at))
    ),
  removeWorker: (id) =>
    V.lift(checkText("id", id, POOL_ID_MAX_LENGTH)).pipe(
      Effect.flatMap((checked) => Effect.mapError(dialect.removeWorker(checked), storage("removeWorker"))),
      Effect.map((rows) => rows.length > 0)
    ),
  pruneWorkers: (silentFor) =>
    V.lift(V.checkMillis("age", silentFor, 0, V.MAX_DELAY_MS)).pipe(
      Effect.flatMap((ms) => Effect.mapError(dialect.pruneWorkers(ms), storage("pruneWorkers"))),
      Effect.map((rows) => rows.map((r) => r.id).sort())
    ),
  listWorkers: (options = {}) =>
    V.lift(
      options.goneAfter === undefined ? Either.right(GONE_AFTER_MS) : V.checkMillis("age", options.goneAfter, 0, V.MAX_DELAY_MS)
    ).pipe(
      Effect.flatMap((goneAfterMs) =>
        dialect.listWorkers.pipe(
          Effect.map((rows) => rows.map((row) => toWorkerInfo(row, goneAfterMs)).sort(byNameThenId)),
          Effect.mapError(storage("listWorkers"))
        )
      )
    )
})
