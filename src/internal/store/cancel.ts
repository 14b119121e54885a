/**
 * Cancel: items a person stops, by id, in one statement (one transaction on
 * SQLite). The outcome of each id, in input order; the pools of this process
 * hear of the running ones at once (on PostgreSQL every pool hears of them
 * through the statement's notification, sql/itemCancelMany.ts).
 */
import * as Effect from "effect/Effect"
import type { CancelOptions, CancelOutcome } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type * as Wakeups from "../../Wakeups.js"
import { num } from "../sql/rows.js"
import type { Storage } from "../storage.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** The last error a cancel gives its items. */
export const cancelError = (reason: string | null): string => (reason === null ? "Cancelled" : `Cancelled: ${reason}`)

const checkIds = (ids: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    if (!Array.isArray(ids) || ids.length === 0) {
      return yield* new InvalidInput({ field: "ids", reason: "give at least one id" })
    }
    if (ids.length > V.MAX_CANCEL_IDS) {
      return yield* new InvalidInput({ field: "ids", reason: `give at most ${V.MAX_CANCEL_IDS} ids at once` })
    }
    for (const id of ids) yield* V.lift(V.checkIntegerIn("ids", id, 1, Number.MAX_SAFE_INTEGER))
    return [...new Set(ids)]
  })

const OUTCOMES: ReadonlySet<string> = new Set<CancelOutcome>(["cancelled", "cancelledRunning", "finished"])

/** `cancel` over the storage; this process's pools hear of the running items cancelled through `wakeups`. */
export const make = (store: Pick<Storage, "itemCancelMany">, wakeups: Wakeups.Service): Pick<Service, "cancel"> => ({
  cancel: (ids, options: CancelOptions = {}) =>
    Effect.gen(function*() {
      const distinct = yield* checkIds(ids)
      const reason = yield* V.lift(V.checkReason(options.reason))
      const rows = yield* store.itemCancelMany(distinct, cancelError(reason)).pipe(Effect.mapError(storage("cancel")))
      const byId = new Map<number, CancelOutcome>()
      for (const row of rows) {
        if (!OUTCOMES.has(row.outcome)) return yield* Effect.die(new Error(`cancel: unexpected outcome ${row.outcome}`))
        byId.set(num(row.id), row.outcome as CancelOutcome)
      }
      const running = distinct.filter((id) => byId.get(id) === "cancelledRunning")
      if (running.length > 0) yield* wakeups.cancelled(running)
      return ids.map((id): CancelOutcome => byId.get(id) ?? "unknown")
    })
})
