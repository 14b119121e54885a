/**
 * Actions on every item a filter matches (retry, cancel, delete, run now), and
 * running a recurring schedule now. A bulk action first collects the
 * matching ids with the same reads as the list (at most MAX_BULK ids, at most
 * MAX_PAGES pages: a search reads at most 10,000 rows a page), then applies
 * the same repository operation as the single-item action to all of them in
 * one statement; items not in a state the operation applies to are left as
 * they are (retryDead and deleteDead take dead items only, cancel waiting and
 * running ones, runNow scheduled ones: waiting and due later). The page asks
 * for a confirmation showing the count first, and the confirmed post acts on
 * the items that page counted (`Confirmations`).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomUUID } from "node:crypto"
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

/** How long a confirmation page's items wait for the confirming post. */
export const CONFIRMATION_TTL_MS = 10 * 60_000
/** The most confirmations one dashboard process keeps waiting (the oldest dropped first). */
const MAX_CONFIRMATIONS = 32

interface Pending {
  readonly action: BulkAction
  readonly filter: string
  readonly ids: ReadonlyArray<number>
  readonly at: number
}

/**
 * The items each confirmation page asked about, by a random id the page's
 * form sends back: the confirmed post acts on exactly those (the ones still
 * in a state the action applies to), not on whatever matches the filter by
 * then. Kept in the dashboard process, for 10 minutes, at most 32: behind a
 * load balancer without sticky sessions a confirmation may reach another
 * process, which then asks again.
 */
export class Confirmations {
  private readonly pending = new Map<string, Pending>()

  constructor(private readonly clock: () => number = Date.now) {}

  /** Keeps the ids a page asks to confirm; the id its form sends back. */
  put(action: BulkAction, filter: ItemFilter, ids: ReadonlyArray<number>): string {
    const now = this.clock()
    for (const [key, p] of this.pending) if (now - p.at > CONFIRMATION_TTL_MS) this.pending.delete(key)
    while (this.pending.size >= MAX_CONFIRMATIONS) this.pending.delete(this.pending.keys().next().value!)
    const key = randomUUID()
    this.pending.set(key, { action, filter: filterKey(filter), ids, at: now })
    return key
  }

  /** The ids confirmed under `key` for this action and filter, once; none if unknown, expired or for another action or filter. */
  take(key: string, action: BulkAction, filter: ItemFilter): Option.Option<ReadonlyArray<number>> {
    const p = this.pending.get(key)
    if (p === undefined) return Option.none()
    this.pending.delete(key)
    const fresh = this.clock() - p.at <= CONFIRMATION_TTL_MS
    return fresh && p.action === action && p.filter === filterKey(filter) ? Option.some(p.ids) : Option.none()
  }
}

const filterKey = (f: ItemFilter): string => JSON.stringify([f.state ?? null, f.kind ?? null, f.key ?? null, f.q ?? null])

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
