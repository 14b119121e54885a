/**
 * The dead-item tools: listing dead items a page at a time, retrying them
 * (waiting again with a fresh attempt budget) and deleting them, by ids or
 * all (optionally of one kind). Both wake this process's idle pools when
 * they changed something: a retried item is due at once, and a dead item
 * that held its group (perGroup.onDead "hold") frees the group's next item
 * when it is retried or deleted; other processes' pools hear of it from the
 * database (PostgreSQL: the statements' NOTIFY; SQLite: the file's watch).
 */
import * as Effect from "effect/Effect"
import type { DeadSelection } from "../../Domain.js"
import type * as Wakeups from "../../Wakeups.js"
import { InvalidInput } from "../../Errors.js"
import type { Service } from "./service.js"
import type { Storage } from "../storage.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"

/** Checks a selection: at least one valid id, or `all: true` with an optional valid kind. */
const checkSelection = (selection: DeadSelection) =>
  Effect.gen(function*() {
    if ("ids" in selection) {
      if (!Array.isArray(selection.ids) || selection.ids.length === 0) {
        return yield* new InvalidInput({ field: "ids", reason: "give at least one id (or all)" })
      }
      for (const id of selection.ids) yield* V.lift(V.checkIntegerIn("ids", id, 1, Number.MAX_SAFE_INTEGER))
      return { ids: selection.ids, kind: null }
    }
    if (selection.all !== true) return yield* new InvalidInput({ field: "ids", reason: "give ids or all: true" })
    const kind = selection.kind === undefined ? null : yield* V.lift(V.checkKind(selection.kind))
    return { ids: null, kind }
  })

/** `listDead`, `retryDead` and `deleteDead` over the storage. */
export const make = (
  store: Pick<Storage, "deadList" | "deadRetry" | "deadDelete">,
  wakeups: Wakeups.Service
): Pick<Service, "listDead" | "retryDead" | "deleteDead"> => ({
  listDead: (page = {}) =>
    Effect.gen(function*() {
      const kind = page.kind === undefined ? null : yield* V.lift(V.checkKind(page.kind))
      const after = page.after === undefined ? 0 : yield* V.lift(V.checkIntegerIn("page", page.after, 0, Number.MAX_SAFE_INTEGER))
      const limit = page.limit === undefined ? 100 : yield* V.lift(V.checkIntegerIn("page", page.limit, 1, 10_000))
      return yield* store.deadList(kind, after, limit).pipe(Effect.mapError(storage("listDead")))
    }),
  retryDead: (selection) =>
    checkSelection(selection).pipe(
      Effect.flatMap((s) => Effect.mapError(store.deadRetry(s), storage("retryDead"))),
      Effect.tap((ids) => (ids.length > 0 ? wakeups.enqueued : Effect.void))
    ),
  deleteDead: (selection) =>
    checkSelection(selection).pipe(
      Effect.flatMap((s) => Effect.mapError(store.deadDelete(s), storage("deleteDead"))),
      Effect.tap((ids) => (ids.length > 0 ? wakeups.enqueued : Effect.void))
    )
})
