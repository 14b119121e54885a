/**
 * Actions on every item a filter matches (retry, cancel, delete, run now), and
 * running a recurring schedule now. A bulk action first collects the
 * matching ids with the same reads as the list (at most MAX_BULK ids, at most
 * MAX_PAGES pages: a search reads at most 10,000 rows a page), then applies
 * the same repository operation as the single-item action to all of them in
 * one statement; items not in a state the operation applies to are left as
 * they are (retryDead and deleteDead take dead items only, cancel waiting and
 * running ones, runNow scheduled ones: waiting and due later). The page asks for a confirmation showing the count first.
 */
import { Effect, Option } from "effect"
import type { Service } from "../store/service.js"
import * as Model from "./model.js"
import { type ItemFilter, Problem, toProblem } from "./model.js"

/** The most ids one bulk action takes (as `cancel`'s limit). */
export const MAX_BULK = 10_000
/** The most pages of the listing one collection reads. */
const MAX_PAGES = 20

/** The actions on every item of a filter. */
export type BulkAction = "retry" | "cancel" | "delete" | "run-now"
export const BULK_ACTIONS: ReadonlyArray<BulkAction> = ["retry", "cancel", "delete", "run-now"]

// The items an action applies to: run now takes the scheduled (waiting, due
// later by the database's clock: `runNow` checks again, so one that fell due
// meanwhile is left as it is).
const appliesTo = (action: BulkAction) => (item: Model.ItemPageResult["items"][number]): boolean =>
  action === "cancel"
    ? item.state === "waiting" || item.state === "running"
    : action === "run-now"
    ? item.state === "waiting" && item.runAt > Date.now()
    : item.state === "dead"

/** What a bulk collection found: the ids, and whether more items may match than were collected. */
export interface Matched {
  readonly ids: ReadonlyArray<number>
  readonly more: boolean
}

/** The ids of the items the filter matches (of the states the action applies to), newest first, from its first page. */
export const collect = (repo: Service, filter: ItemFilter, action: BulkAction): Effect.Effect<Matched, Problem> =>
  Effect.gen(function*() {
    const applies = appliesTo(action)
    const ids: Array<number> = []
    let cursor: string | undefined = undefined
    for (let page = 0; page < MAX_PAGES; page++) {
      const got: Model.ItemPageResult = yield* Model.items(repo, { ...filter, cursor, limit: 1000 })
      for (const item of got.items) if (applies(item) && ids.length < MAX_BULK) ids.push(item.id)
      if (got.cursor === null) return { ids, more: false }
      if (ids.length >= MAX_BULK) return { ids, more: true }
      cursor = got.cursor
    }
    return { ids, more: true }
  })

/** A confirmation's count and newest id, as the confirmation page's form sent them; a 400 if they are not. */
export const readConfirmation = (count: string, upto: string): Effect.Effect<{ readonly count: number; readonly upto: number }, Problem> => {
  const n = /^\d{1,9}$/.test(count) ? Number(count) : -1
  const id = /^\d{1,16}$/.test(upto) ? Number(upto) : -1
  return n < 0 || n > MAX_BULK || !Number.isSafeInteger(id) || id < 0
    ? Effect.fail(new Problem({ status: 400, message: "confirm and upto must be the count and the newest id the confirmation showed" }))
    : Effect.succeed({ count: n, upto: id })
}

/** Applies the action to the collected ids, in one statement; how many items it changed. */
export const apply = (repo: Service, ids: ReadonlyArray<number>, action: BulkAction): Effect.Effect<number, Problem> => {
  if (ids.length === 0) return Effect.succeed(0)
  const run = action === "retry"
    ? Effect.map(repo.retryDead({ ids }), (changed) => changed.length)
    : action === "delete"
    ? Effect.map(repo.deleteDead({ ids }), (changed) => changed.length)
    : action === "run-now"
    ? Effect.map(repo.runNow(ids), (changed) => changed.length)
    : Effect.map(
      repo.cancel(ids, { reason: "cancelled from the dashboard" }),
      (outcomes) => outcomes.filter((o) => o === "cancelled" || o === "cancelledRunning").length
    )
  return Effect.mapError(run, toProblem)
}

/**
 * Enqueues one item of a recurring schedule now, with its kind and payload
 * and a key as a tick's at this time (`<name>@<ISO time>`, so `tickOf` reads
 * it); the schedule's own ticks are unchanged. A 404 for an unknown name.
 */
export const runSchedule = (repo: Service, name: string): Effect.Effect<number, Problem> =>
  Effect.gen(function*() {
    const schedules = yield* repo.listSchedules
    const schedule = Option.fromNullable(schedules.find((s) => s.name === name))
    if (Option.isNone(schedule)) return yield* new Problem({ status: 404, message: `no recurring schedule ${name}` })
    const { kind, payload } = schedule.value
    const result = yield* repo.enqueue(kind, payload, { key: `${name}@${new Date().toISOString()}` })
    return result.id
  }).pipe(Effect.mapError(toProblem))
