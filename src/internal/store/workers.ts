/**
 * The live-workers table: a worker pool's heartbeat (its registration is the
 * first), its removal, the removal of pools long silent, and the listing with
 * each pool's status. Input is checked before any statement (a typed
 * `InvalidInput`, nothing written); a pool's status is decided from its
 * heartbeat's age on the database's clock (sql/workerList.ts).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { WorkerHeartbeat } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type { HeartbeatRow } from "../sql/workerHeartbeat.js"
import type { Storage } from "../storage.js"
import { GONE_AFTER_MS } from "../liveness.js"
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

/** A heartbeat checked and encoded for the statement. */
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

/** The operations on the live-workers table. */
export type Workers = Pick<Service, "heartbeatWorker" | "removeWorker" | "pruneWorkers" | "listWorkers">

/** The live-workers operations over the storage. */
export const make = (
  store: Pick<Storage, "workerHeartbeat" | "workerRemove" | "workerPrune" | "workerList">
): Workers => ({
  heartbeatWorker: (beat) =>
    checkHeartbeat(beat).pipe(
      Effect.flatMap((row) => Effect.mapError(store.workerHeartbeat(row), storage("heartbeatWorker")))
    ),
  removeWorker: (id) =>
    V.lift(checkText("id", id, POOL_ID_MAX_LENGTH)).pipe(
      Effect.flatMap((checked) => Effect.mapError(store.workerRemove(checked), storage("removeWorker")))
    ),
  pruneWorkers: (silentFor) =>
    V.lift(V.checkMillis("age", silentFor, 0, V.MAX_DELAY_MS)).pipe(
      Effect.flatMap((ms) => Effect.mapError(store.workerPrune(ms), storage("pruneWorkers")))
    ),
  listWorkers: (options = {}) =>
    V.lift(
      options.goneAfter === undefined ? Either.right(GONE_AFTER_MS) : V.checkMillis("age", options.goneAfter, 0, V.MAX_DELAY_MS)
    ).pipe(
      Effect.flatMap((goneAfterMs) => Effect.mapError(store.workerList(goneAfterMs), storage("listWorkers")))
    )
})
