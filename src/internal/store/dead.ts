/**
 * The dead-item tools: listing dead items a page at a time, retrying them
 * (waiting again with a fresh attempt budget) and deleting them, by ids or
 * all (optionally of one kind).
 */
import { Effect } from "effect"
import type { DeadSelection } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type { Service } from "./service.js"
import type { Dialect } from "../dialect.js"
import * as V from "../validate.js"
import { storage, toIds, toItem } from "./decode.js"

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

/** `listDead`, `retryDead` and `deleteDead` over a dialect. */
export const make = (dialect: Dialect): Pick<Service, "listDead" | "retryDead" | "deleteDead"> => ({
  listDead: (page = {}) =>
    Effect.gen(function*() {
      const kind = page.kind === undefined ? null : yield* V.lift(V.checkKind(page.kind))
      const after = page.after === undefined ? 0 : yield* V.lift(V.checkIntegerIn("page", page.after, 0, Number.MAX_SAFE_INTEGER))
      const limit = page.limit === undefined ? 100 : yield* V.lift(V.checkIntegerIn("page", page.limit, 1, 10_000))
      const rows = yield* dialect.listDead(kind, after, limit).pipe(Effect.mapError(storage("listDead")))
      return rows.map(toItem)
    }),
  retryDead: (selection) =>
    checkSelection(selection).pipe(
      Effect.flatMap((s) => Effect.mapError(dialect.retryDead(s), storage("retryDead"))),
      Effect.map(toIds)
    ),
  deleteDead: (selection) =>
    checkSelection(selection).pipe(
      Effect.flatMap((s) => Effect.mapError(dialect.deleteDead(s), storage("deleteDead"))),
      Effect.map(toIds)
    )
})
