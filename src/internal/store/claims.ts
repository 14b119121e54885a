/**
 * Claiming, and every change the holder of a claim makes after it (complete,
 * fail, release, snooze, extend). Each change is fenced by the claim's token
 * (./fence.ts): a worker whose lease was lost, and whose item another worker
 * claimed, changes nothing.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { Claim, Completion, FailOutcome, ReleaseOutcome, SnoozeOutcome } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type { Service } from "./service.js"
import type { CompleteRow } from "../sql/claimComplete.js"
import type { FailRow } from "../sql/claimFail.js"
import type { SnoozeRow } from "../sql/claimSnooze.js"
import type * as Storage from "../storage.js"
import * as V from "../validate.js"
import { claimOrder, storage, toClaim, toFailOutcome, toReleaseOutcome, toSnoozeOutcome } from "./decode.js"
import { applied, fence, fenceKey, withTwinFallback } from "./fence.js"

/** The operations on claims. */
export type Claims = Pick<
  Service,
  | "claim"
  | "complete"
  | "completeMany"
  | "maxResultBytes"
  | "fail"
  | "failMany"
  | "release"
  | "releaseMany"
  | "snooze"
  | "snoozeMany"
  | "extend"
  | "extendMany"
>

/** A budget of attempts: an integer from 1 to the limit. */
const checkBudget = (value: number) => V.checkIntegerIn("maxAttempts", value, 1, V.MAX_ATTEMPTS_LIMIT)

/** How the claims' holders complete: keep done items (a retention above 0), and the largest result. */
export interface CompleteSettings {
  readonly keepDone: boolean
  readonly maxResultBytes: number
}

// A claim alone, or a completion with its result: a Claim has no `claim` field.
const asCompletion = (c: Claim | Completion): Completion => ("claim" in c ? c : { claim: c })

// Every result is encoded (and checked) before anything is sent: one bad
// result refuses the batch and changes nothing.
const completeRows = (completions: ReadonlyArray<Completion>, maxBytes: number, keep: boolean) => {
  const rows: Array<CompleteRow> = []
  for (let i = 0; i < completions.length; i++) {
    const { claim, result } = completions[i]
    let json: string | null = null
    // Deleted at once, a result has nowhere to go: it is neither checked nor kept.
    if (keep && result !== undefined) {
      const encoded = V.encodeResult(result, maxBytes)
      if (Either.isLeft(encoded)) {
        const reason = completions.length === 1 ? encoded.left.reason : `completion ${i}: ${encoded.left.reason}`
        return Either.left(new InvalidInput({ field: "result", reason }))
      }
      json = encoded.right
    }
    rows.push({ id: claim.id, token: claim.token, result: json })
  }
  return Either.right(rows)
}

// Every delay is checked before anything is sent: one bad delay changes
// nothing of the batch (synchronous, as completeRows: no Effect per item).
const failRows = (failures: Parameters<Claims["failMany"]>[0]): Either.Either<Array<FailRow>, InvalidInput> => {
  const rows: Array<FailRow> = []
  for (const { claim, error, next } of failures) {
    let delay: number | null = null
    if (next._tag === "Retry") {
      const checked = V.checkMillis("delay", next.delay, 0, V.MAX_DELAY_MS)
      if (Either.isLeft(checked)) return Either.left(checked.left)
      delay = checked.right
    }
    // The claim's budget is spent: dead. (The statement checks only a
    // budget the enqueue gave; a default one is the claim's: sql/claimFail.ts.)
    const delayMs = claim.attempt >= claim.maxAttempts ? null : delay
    const cancel = next._tag === "Cancel"
    rows.push({ id: claim.id, token: claim.token, error: V.normaliseError(String(error)), delayMs, cancel })
  }
  return Either.right(rows)
}

/**
 * The claim and its fenced changes over the storage. `defaultMaxAttempts`: the
 * budget of an item enqueued without one whose kind the claim gives none.
 */
export const make = (
  store: Storage.Claims & Pick<Storage.Units, "isUniqueViolation">,
  defaultMaxAttempts: number,
  settings: CompleteSettings
): Claims => {
  const fallback = checkBudget(defaultMaxAttempts)
  if (Either.isLeft(fallback)) throw new Error(`QueueRepo: defaultMaxAttempts ${fallback.left.reason}`)
  const self: Claims = {
    claim: ({ kinds, lease, limit, limitedMax, maxAttemptsByKind, traceContext, worker }) =>
      Effect.gen(function*() {
        const w = yield* V.lift(V.checkWorker(worker))
        const n = yield* V.lift(V.checkIntegerIn("limit", limit, 1, V.MAX_CLAIM_LIMIT))
        const leaseMs = yield* V.lift(V.checkMillis("lease", lease, 1, V.MAX_LEASE_MS))
        const limited = limitedMax === undefined ? n : yield* V.lift(V.checkIntegerIn("limit", limitedMax, 0, n))
        if (kinds !== undefined) {
          for (const kind of kinds) yield* V.lift(V.checkKind(kind))
        }
        if (maxAttemptsByKind !== undefined) {
          for (const budget of maxAttemptsByKind.values()) {
            const checked = checkBudget(budget)
            if (Either.isLeft(checked)) return yield* checked.left
          }
        }
        const rows = yield* store.claimAcquire(w, n, leaseMs, kinds === undefined ? null : kinds, limited, traceContext !== false).pipe(
          Effect.mapError(storage("claim"))
        )
        return rows.map((row) => toClaim(row, w, maxAttemptsByKind, defaultMaxAttempts, leaseMs)).sort(claimOrder)
      }),
    complete: (claim, result) => Effect.map(self.completeMany([{ claim, result }]), (r) => r[0]),
    completeMany: (given) =>
      Effect.gen(function*() {
        if (given.length === 0) return []
        const completions = given.map(asCompletion)
        const rows = yield* V.lift(completeRows(completions, settings.maxResultBytes, settings.keepDone))
        const done = yield* store.claimComplete(rows, settings.keepDone).pipe(Effect.mapError(storage("complete")))
        return applied(completions.map((c) => c.claim), done)
      }),
    maxResultBytes: settings.maxResultBytes,
    fail: (claim, error, next) => Effect.map(self.failMany([{ claim, error, next }]), (r) => r[0]),
    failMany: (failures) =>
      Effect.gen(function*() {
        if (failures.length === 0) return []
        const rows = yield* V.lift(failRows(failures))
        const outcomes = yield* withTwinFallback(store, rows, store.claimFail).pipe(Effect.mapError(storage("fail")))
        return failures.map(({ claim }): FailOutcome => toFailOutcome(outcomes.get(fenceKey(claim.id, claim.token))))
      }),
    release: (claim) => Effect.map(self.releaseMany([claim]), (r) => r[0]),
    releaseMany: (claims) =>
      claims.length === 0 ? Effect.succeed([]) : withTwinFallback(store, claims.map(fence), store.claimRelease).pipe(
        Effect.map((outcomes) =>
          claims.map((claim): ReleaseOutcome => toReleaseOutcome(outcomes.get(fenceKey(claim.id, claim.token))))
        ),
        Effect.mapError(storage("release"))
      ),
    snooze: (claim, delay) => Effect.map(self.snoozeMany([{ claim, delay }]), (r) => r[0]),
    snoozeMany: (snoozes) =>
      Effect.gen(function*() {
        if (snoozes.length === 0) return []
        // Every delay is checked before anything is sent: one bad delay changes nothing of the batch.
        const rows: Array<SnoozeRow> = []
        for (const { claim, delay } of snoozes) {
          const delayMs = yield* V.lift(V.checkMillis("delay", delay, 0, V.MAX_DELAY_MS))
          rows.push({ id: claim.id, token: claim.token, delayMs })
        }
        const outcomes = yield* withTwinFallback(store, rows, store.claimSnooze).pipe(Effect.mapError(storage("snooze")))
        return snoozes.map(({ claim }): SnoozeOutcome => toSnoozeOutcome(outcomes.get(fenceKey(claim.id, claim.token))))
      }),
    extend: (claim, lease) => Effect.map(self.extendMany([claim], lease), (r) => r[0]),
    extendMany: (claims, lease) =>
      Effect.gen(function*() {
        const leaseMs = yield* V.lift(V.checkMillis("lease", lease, 1, V.MAX_LEASE_MS))
        if (claims.length === 0) return []
        const rows = yield* store.claimExtend(claims.map(fence), leaseMs).pipe(Effect.mapError(storage("extend")))
        return applied(claims, rows)
      })
  }
  return self
}
