/**
 * Kinds as things a person operates: listing them with their controls and
 * counts, pausing and resuming, and their global limits (set by a person, or
 * declared by a handler's code: a person's setting wins, below).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { GlobalLimits, PerGroup, Rate } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type * as Wakeups from "../../Wakeups.js"
import type { LimitsRow } from "../sql/kindSetLimits.js"
import type { Storage } from "../storage.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** The most items of one kind a global concurrency limit may allow. */
export const MAX_GLOBAL_CONCURRENCY = 1_000_000
/** The most starts a rate may allow per period: each is a row the claim keeps. */
export const MAX_RATE_LIMIT = 10_000
/** The longest rate period. */
export const MAX_RATE_PERIOD_MS = 31 * 24 * 3600 * 1000

/** The operations on kinds. */
export type Kinds = Pick<
  Service,
  | "listKinds"
  | "pauseKind"
  | "resumeKind"
  | "setKindLimits"
  | "declareKindLimits"
  | "resetKindLimits"
  | "declarePerGroup"
  | "setGroupLimits"
>

/** A `perGroup` declaration checked, with its defaults filled in. */
export interface GroupSettings {
  readonly concurrency: number
  readonly ordered: boolean
  readonly onFailure: "wait" | "continue"
  readonly onDead: "release" | "hold"
  /** `rate`'s limit and period, or both null. */
  readonly rateLimit: number | null
  readonly ratePeriodMs: number | null
}

// A choice among `choices` (undefined: the first), or an InvalidInput on perGroup naming the member.
const checkChoice = <A extends string>(name: string, value: unknown, choices: readonly [A, ...Array<A>]) =>
  value === undefined
    ? Either.right(choices[0])
    : choices.includes(value as A)
    ? Either.right(value as A)
    : Either.left(
      new InvalidInput({ field: "perGroup", reason: `${name} must be ${choices.map((c) => `"${c}"`).join(" or ")}` })
    )

// A per-group rate: an InvalidInput on perGroup naming rate.limit or rate.period.
const checkGroupRate = (rate: Rate): Either.Either<{ readonly limit: number; readonly periodMs: number }, InvalidInput> =>
  Either.gen(function*() {
    const on = (member: string) => (e: InvalidInput) => new InvalidInput({ field: "perGroup", reason: `${member} ${e.reason}` })
    if (typeof rate !== "object" || rate === null) {
      return yield* Either.left(new InvalidInput({ field: "perGroup", reason: "rate must be { limit, period }" }))
    }
    const limit = yield* Either.mapLeft(V.checkIntegerIn("rate", rate.limit, 1, MAX_RATE_LIMIT), on("rate.limit"))
    const periodMs = yield* Either.mapLeft(V.checkMillis("rate", rate.period, 1, MAX_RATE_PERIOD_MS), on("rate.period"))
    return { limit, periodMs }
  })

/** Checks a `perGroup` declaration: none (undefined or null), or its settings. */
export const checkPerGroup = (
  perGroup: PerGroup | null | undefined
): Either.Either<GroupSettings | null, InvalidInput> =>
  Either.gen(function*() {
    if (perGroup === undefined || perGroup === null) return null
    if (typeof perGroup !== "object") {
      return yield* Either.left(new InvalidInput({ field: "perGroup", reason: "must be { concurrency, ordered? }" }))
    }
    const concurrency = yield* Either.mapLeft(
      V.checkIntegerIn("concurrency", perGroup.concurrency, 1, V.MAX_GROUP_CONCURRENCY),
      (e) => new InvalidInput({ field: "perGroup", reason: `concurrency ${e.reason}` })
    )
    const ordered = perGroup.ordered ?? false
    if (typeof ordered !== "boolean") {
      return yield* Either.left(new InvalidInput({ field: "perGroup", reason: "ordered must be true or false" }))
    }
    const onFailure = yield* checkChoice("onFailure", perGroup.onFailure, ["wait", "continue"])
    const onDead = yield* checkChoice("onDead", perGroup.onDead, ["release", "hold"])
    const rate = perGroup.rate === undefined ? null : yield* checkGroupRate(perGroup.rate)
    return { concurrency, ordered, onFailure, onDead, rateLimit: rate?.limit ?? null, ratePeriodMs: rate?.periodMs ?? null }
  })

const checkRate = (rate: Rate): Either.Either<{ readonly limit: number; readonly periodMs: number }, InvalidInput> =>
  Either.gen(function*() {
    if (typeof rate !== "object" || rate === null) {
      return yield* Either.left(new InvalidInput({ field: "rate", reason: "must be { limit, period }" }))
    }
    const limit = yield* V.checkIntegerIn("rate", rate.limit, 1, MAX_RATE_LIMIT)
    const periodMs = yield* V.checkMillis("rate", rate.period, 1, MAX_RATE_PERIOD_MS)
    return { limit, periodMs }
  })

/** Checks limits; `undefined` fields are kept (a person's setting) or none (a declaration). */
export const checkLimits = (limits: GlobalLimits): Either.Either<LimitsRow, InvalidInput> =>
  Either.gen(function*() {
    if (typeof limits !== "object" || limits === null) {
      return yield* Either.left(new InvalidInput({ field: "concurrency", reason: "limits must be { concurrency?, rate? }" }))
    }
    const concurrency = limits.concurrency === undefined || limits.concurrency === null
      ? null
      : yield* V.checkIntegerIn("concurrency", limits.concurrency, 1, MAX_GLOBAL_CONCURRENCY)
    const rate = limits.rate === undefined || limits.rate === null ? null : yield* checkRate(limits.rate)
    return {
      concurrency,
      rateLimit: rate?.limit ?? null,
      ratePeriodMs: rate?.periodMs ?? null,
      keepConcurrency: limits.concurrency === undefined,
      keepRate: limits.rate === undefined
    }
  })

/** Checks a person's group limits: as a kind's, on `perGroup`, the concurrency at most 10,000; one of them given. */
export const checkGroupLimits = (limits: GlobalLimits): Either.Either<LimitsRow, InvalidInput> =>
  Either.gen(function*() {
    const onPerGroup = (e: InvalidInput) => new InvalidInput({ field: "perGroup", reason: `${e.field} ${e.reason}` })
    const checked = yield* Either.mapLeft(checkLimits(limits), onPerGroup)
    if (checked.keepConcurrency === true && checked.keepRate === true) {
      return yield* Either.left(new InvalidInput({ field: "perGroup", reason: "give a concurrency or a rate (null removes one)" }))
    }
    if (checked.concurrency !== null) {
      yield* Either.mapLeft(V.checkIntegerIn("concurrency", checked.concurrency, 1, V.MAX_GROUP_CONCURRENCY), onPerGroup)
    }
    return checked
  })

/**
 * The operations over the storage. A change that may let items start (a
 * resume, a limit set, reset or declared) wakes this process's pools; on
 * PostgreSQL its statement notifies every process's.
 */
export const make = (
  store: Pick<Storage, "kindList" | "kindSetPaused" | "kindSetLimits" | "kindSetGroups" | "kindSetGroupLimits">,
  wakeups: Wakeups.Service
): Kinds => {
  const kindOf = (kind: string) => V.lift(V.checkKind(kind))
  const limits = (kind: string, given: GlobalLimits, by: "person" | "code") =>
    Effect.gen(function*() {
      const k = yield* kindOf(kind)
      const checked = yield* V.lift(checkLimits(given))
      if (by === "person" && checked.keepConcurrency === true && checked.keepRate === true) {
        return yield* new InvalidInput({ field: "concurrency", reason: "give a concurrency or a rate (null removes one)" })
      }
      const changed = yield* store.kindSetLimits(k, checked, by).pipe(Effect.mapError(storage("setKindLimits")))
      if (changed) yield* wakeups.enqueued
      return changed
    })
  return {
    listKinds: Effect.mapError(store.kindList, storage("listKinds")),
    pauseKind: (kind) =>
      Effect.flatMap(kindOf(kind), (k) => Effect.asVoid(Effect.mapError(store.kindSetPaused(k, true), storage("pauseKind")))),
    resumeKind: (kind) =>
      Effect.flatMap(kindOf(kind), (k) =>
        store.kindSetPaused(k, false).pipe(Effect.mapError(storage("resumeKind")), Effect.zipRight(wakeups.enqueued))),
    setKindLimits: (kind, given) => Effect.asVoid(limits(kind, given, "person")),
    declareKindLimits: (kind, given) => limits(kind, given, "code"),
    declarePerGroup: (kind, given) =>
      Effect.gen(function*() {
        const k = yield* kindOf(kind)
        const checked = yield* V.lift(checkPerGroup(given))
        const changed = yield* store.kindSetGroups(k, checked).pipe(
          Effect.mapError(storage("declarePerGroup"))
        )
        if (changed) yield* wakeups.enqueued
        return changed
      }),
    setGroupLimits: (kind, given) =>
      Effect.gen(function*() {
        const k = yield* kindOf(kind)
        const checked = yield* V.lift(checkGroupLimits(given))
        const changed = yield* store.kindSetGroupLimits(k, checked, "person").pipe(Effect.mapError(storage("setGroupLimits")))
        if (changed) yield* wakeups.enqueued
      }),
    resetKindLimits: (kind) =>
      Effect.gen(function*() {
        const k = yield* kindOf(kind)
        const none = { concurrency: null, rateLimit: null, ratePeriodMs: null }
        const reset = Effect.zipWith(
          store.kindSetLimits(k, none, "reset"),
          store.kindSetGroupLimits(k, none, "reset"),
          (a, b) => a || b
        )
        if (yield* reset.pipe(Effect.mapError(storage("resetKindLimits")))) yield* wakeups.enqueued
      })
  }
}
