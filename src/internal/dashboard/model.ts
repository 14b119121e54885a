/**
 * The dashboard's read model and actions, over `QueueRepo` only: what every
 * page, the JSON API and /metrics show, and what an action does. Failures
 * are a `Problem` with the HTTP status to answer with.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type {
  FinishedMinute, GroupInfo, GroupsDue, GroupPage, HorizonReport, Item, KindInfo, ListState, OldestDue, RetriedMinute, ScheduleInfo, Total, WorkerInfo
} from "../../Domain.js"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type { Resolved } from "../horizon.js"
import * as Db from "../sql/db.js"
import type { Service } from "../store/service.js"
import * as WorkflowCounts from "../workflow/counts.js"
import type { StateCount } from "../workflow/counts.js"

/** A refused or failed request, and the status it answers with. */
export class Problem extends Data.TaggedError("Problem")<{ readonly status: number; readonly message: string }> {}

/** A repository failure as a Problem: bad input is 400; a database failure 503, without its cause (it may name the database). */
export const toProblem = (error: InvalidInput | StorageError | Problem): Problem => {
  switch (error._tag) {
    case "Problem":
      return error
    case "InvalidInput":
      return new Problem({ status: 400, message: `invalid ${error.field}: ${error.reason}` })
    case "StorageError":
      return new Problem({ status: 503, message: `the database could not be reached or refused ${error.operation}` })
  }
}

/**
 * The overview: every kind with its counts and controls, due latency, the
 * last hour's throughput, workers, and who holds back the xmin horizon.
 */
export interface Overview {
  readonly kinds: ReadonlyArray<KindInfo>
  readonly oldestDue: ReadonlyArray<OldestDue>
  /** The kinds whose groups the claim limits: their blocked items and oldest ready item. */
  readonly groupsDue: ReadonlyArray<GroupsDue>
  /** Per minute of the last hour (oldest first, minutes with none left out), summed over kinds. */
  readonly throughput: ReadonlyArray<Minute>
  readonly finishedByKind: ReadonlyArray<FinishedMinute>
  readonly retriedByKind: ReadonlyArray<RetriedMinute>
  readonly workers: ReadonlyArray<WorkerInfo>
  /** PostgreSQL: the holders of the xmin horizon past the dashboard's threshold (none: an empty list); null on SQLite. */
  readonly horizon: HorizonReport | null
}

/** One minute's finished items by state and its retried attempts (epoch ms of its start). */
export interface Minute {
  readonly minute: number
  readonly done: number
  readonly dead: number
  readonly cancelled: number
  readonly retried: number
}

const byMinute = (finished: ReadonlyArray<FinishedMinute>, retried: ReadonlyArray<RetriedMinute>): ReadonlyArray<Minute> => {
  const minutes = new Map<number, { -readonly [K in keyof Minute]: number }>()
  const at = (minute: number) => {
    const m = minutes.get(minute) ?? { minute, done: 0, dead: 0, cancelled: 0, retried: 0 }
    minutes.set(minute, m)
    return m
  }
  for (const r of finished) at(r.minute)[r.state] += r.count
  for (const r of retried) at(r.minute).retried += r.count
  return [...minutes.values()].sort((a, b) => a.minute - b.minute)
}

/**
 * Reads the overview (seven statements on PostgreSQL, six on SQLite, one
 * after another: a dashboard takes one connection at a time); `threshold`:
 * when a holder of the xmin horizon is named.
 */
export const overview = (repo: Service, threshold: Resolved): Effect.Effect<Overview, Problem> =>
  Effect.gen(function*() {
    const kinds = yield* repo.listKinds
    const oldestDue = yield* repo.oldestDue
    const groupsDue = yield* repo.groupsDue
    const finished = yield* repo.finishedPerMinute(60)
    const retried = yield* repo.retriedPerMinute(60)
    const workers = yield* repo.listWorkers()
    const horizon = Option.getOrNull(yield* repo.horizon({ age: threshold.ageMs, transactions: threshold.transactions }))
    return {
      kinds, oldestDue, groupsDue, throughput: byMinute(finished, retried), finishedByKind: finished, retriedByKind: retried, workers, horizon
    }
  }).pipe(Effect.mapError(toProblem))

/** Finished items and retried attempts per minute as aligned columns (what a time-series chart takes): every minute of the window, zeros included. */
export interface Series {
  /** Each minute's start, epoch ms (database clock), oldest first. */
  readonly minutes: ReadonlyArray<number>
  readonly done: ReadonlyArray<number>
  readonly dead: ReadonlyArray<number>
  readonly cancelled: ReadonlyArray<number>
  /** Failed attempts sent back to waiting (not finished: the item runs again). */
  readonly retried: ReadonlyArray<number>
}

/** The last `minutes` minutes (1 to 1,440; the current one included) as aligned columns, summed over kinds (or of one kind). */
export const throughput = (repo: Service, minutes: number, kind: string | undefined): Effect.Effect<Series, Problem> =>
  Effect.gen(function*() {
    const rows = yield* repo.finishedPerMinute(minutes).pipe(Effect.mapError(toProblem))
    const retried = yield* repo.retriedPerMinute(minutes).pipe(Effect.mapError(toProblem))
    const last = Math.floor(Date.now() / 60_000) * 60_000
    const starts = Array.from({ length: minutes }, (_, i) => last - (minutes - 1 - i) * 60_000)
    const index = new Map(starts.map((m, i) => [m, i]))
    const zeros = () => starts.map(() => 0)
    const columns = { done: zeros(), dead: zeros(), cancelled: zeros(), retried: zeros() }
    const add = (column: Array<number>, r: { readonly minute: number; readonly kind: string; readonly count: number }) => {
      const i = index.get(r.minute)
      if (i !== undefined && (kind === undefined || r.kind === kind)) column[i] += r.count
    }
    for (const r of rows) add(columns[r.state], r)
    for (const r of retried) add(columns.retried, r)
    return { minutes: starts, ...columns }
  })

/** How long one read of the overview serves every viewer and scrape (its reads scan the items). */
export const OVERVIEW_TTL_MS = 2000

/**
 * A read of the database made at most once per OVERVIEW_TTL_MS, however many
 * pages refresh and scrapers scrape: what a dashboard adds to the database's
 * load is bounded by time, not by its viewers. (Actions do not wait for it: a
 * page after an action may show the state of up to 2 s before.)
 */
export class TimedCache<A> {
  private last: { readonly at: number; readonly value: A } | undefined

  constructor(
    private readonly load: (repo: Service) => Effect.Effect<A, Problem>,
    private readonly clock: () => number = Date.now
  ) {}

  read(repo: Service): Effect.Effect<A, Problem> {
    return Effect.suspend(() => {
      const now = this.clock()
      const last = this.last
      if (last !== undefined && now - last.at < OVERVIEW_TTL_MS && now >= last.at) return Effect.succeed(last.value)
      return Effect.tap(this.load(repo), (value) => Effect.sync(() => (this.last = { at: now, value })))
    })
  }

  /** Forgets the last read: the next one reads the database (after an action, so its page shows it). */
  clear(): void {
    this.last = undefined
  }
}

/** The overview, read at most every 2 s (every page's and /metrics'), its horizon by `threshold`. */
export class OverviewCache extends TimedCache<Overview> {
  constructor(threshold: Resolved, clock: () => number = Date.now) {
    super((repo) => overview(repo, threshold), clock)
  }
}

/**
 * The totals of /metrics' counters, read at most every 2 s: only /metrics
 * reads them (their statement counts every finished item, which the pages do
 * not need), so a page refresh never pays for it.
 */
export class TotalsCache extends TimedCache<ReadonlyArray<Total>> {
  constructor(clock: () => number = Date.now) {
    super((repo) => Effect.mapError(repo.totals, toProblem), clock)
  }
}

/**
 * The workflows' counts of /metrics (executions by workflow and state, the
 * oldest suspended), read at most every 2 s; null (none written) without a
 * SqlClient in context (a router given only a QueueRepo).
 */
export class WorkflowCountsCache extends TimedCache<ReadonlyArray<StateCount> | null> {
  constructor(clock: () => number = Date.now) {
    super(() => workflowCounts, clock)
  }
}

const workflowCounts = Effect.flatMap(Effect.serviceOption(SqlClient.SqlClient), (sql) =>
  Option.isNone(sql) ? Effect.succeed(null) : Effect.flatMap(Db.make(sql.value), (db) =>
    Effect.mapError(WorkflowCounts.counts(db), () =>
      new Problem({ status: 503, message: "the database could not be reached or refused the workflows' counts" }))))

/** The filters of an item listing, as its URL gives them (`/items?state=&kind=&key=&q=&cursor=`). */
export interface ItemFilter {
  readonly state?: ListState | undefined
  readonly kind?: string | undefined
  readonly key?: string | undefined
  readonly q?: string | undefined
  readonly cursor?: string | undefined
  readonly limit?: number | undefined
}

const STATES: ReadonlyArray<ListState> = ["waiting", "scheduled", "running", "done", "dead", "cancelled"]

/** The filter of a query string: empty values are no filter; a state that names none is a 400. */
export const readFilter = (params: URLSearchParams): Effect.Effect<ItemFilter, Problem> =>
  Effect.gen(function*() {
    const get = (name: string) => {
      const value = params.get(name)
      return value === null || value.trim() === "" ? undefined : value.trim()
    }
    const state = get("state")
    if (state !== undefined && !STATES.includes(state as ListState)) {
      return yield* new Problem({ status: 400, message: `invalid state: must be one of ${STATES.join(", ")}` })
    }
    const limitText = get("limit")
    const limit = limitText === undefined ? undefined : Number(limitText)
    if (limit !== undefined && !Number.isSafeInteger(limit)) {
      return yield* new Problem({ status: 400, message: "invalid limit: must be an integer from 1 to 1000" })
    }
    return { state: state as ListState | undefined, kind: get("kind"), key: get("key"), q: get("q"), cursor: get("cursor"), limit }
  })

/** A page of items and the cursor of the next. */
export interface ItemPageResult {
  readonly items: ReadonlyArray<Item>
  readonly cursor: string | null
}

/** A page of items, newest first: `list` (indexed) without a key or text, else the bounded `searchItems`. */
export const items = (repo: Service, f: ItemFilter): Effect.Effect<ItemPageResult, Problem> =>
  (f.key === undefined && f.q === undefined
    ? repo.list({ state: f.state, kind: f.kind, cursor: f.cursor, limit: f.limit ?? 50 })
    : repo.searchItems({ state: f.state, kind: f.kind, key: f.key, text: f.q, cursor: f.cursor, limit: f.limit ?? 50 }))
    .pipe(Effect.mapError(toProblem))

/** An id from a path: a positive integer, else a 400. */
export const readId = (text: string | undefined): Effect.Effect<number, Problem> => {
  const id = Number(text)
  return text !== undefined && /^\d{1,16}$/.test(text) && Number.isSafeInteger(id) && id >= 1
    ? Effect.succeed(id)
    : Effect.fail(new Problem({ status: 400, message: "invalid id: must be a positive integer" }))
}

/** One item, or a 404. */
export const item = (repo: Service, id: number): Effect.Effect<Item, Problem> =>
  repo.get(id).pipe(
    Effect.mapError(toProblem),
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(new Problem({ status: 404, message: `no item ${id} (never enqueued, or finished and pruned)` })),
      onSome: Effect.succeed
    }))
  )

/** A page of a kind's groups (`cursor`: the previous page's). */
export const groups = (repo: Service, kind: string, cursor: string | undefined): Effect.Effect<GroupPage, Problem> =>
  repo.listGroups(kind, { after: cursor, limit: 100 }).pipe(Effect.mapError(toProblem))

/** An unfinished grouped item's group (undefined: no group, finished, or the group has none left). */
export const groupOf = (repo: Service, item: Item): Effect.Effect<GroupInfo | undefined, Problem> =>
  item.group === null || (item.state !== "waiting" && item.state !== "running")
    ? Effect.succeed(undefined)
    : repo.listGroups(item.kind, { group: item.group, limit: 1 }).pipe(
      Effect.map((page) => page.groups[0]),
      Effect.mapError(toProblem)
    )

export const schedules = (repo: Service): Effect.Effect<ReadonlyArray<ScheduleInfo>, Problem> =>
  repo.listSchedules.pipe(Effect.mapError(toProblem))

export const workers = (repo: Service): Effect.Effect<ReadonlyArray<WorkerInfo>, Problem> =>
  repo.listWorkers().pipe(Effect.mapError(toProblem))

export const kinds = (repo: Service): Effect.Effect<ReadonlyArray<KindInfo>, Problem> =>
  repo.listKinds.pipe(Effect.mapError(toProblem))

/** The actions on one item. */
export type ItemAction = "retry" | "cancel" | "delete" | "run-now"
export const ITEM_ACTIONS: ReadonlyArray<ItemAction> = ["retry", "cancel", "delete", "run-now"]

const conflict = (message: string) => new Problem({ status: 409, message })

/**
 * Does `action` to item `id` through the same repository operations as the
 * command (retryDead, deleteDead, cancel, runNow); a 404 for an unknown id, a
 * 409 when the item is not in a state the action applies to.
 */
export const actOnItem = (repo: Service, id: number, action: ItemAction): Effect.Effect<string, Problem> =>
  Effect.gen(function*() {
    const current = yield* item(repo, id)
    switch (action) {
      case "retry": {
        const ids = yield* repo.retryDead({ ids: [id] })
        if (ids.length === 0) {
          return yield* conflict(current.state === "dead" ? "a waiting item holds its key: it stays dead" : `item ${id} is ${current.state}, not dead`)
        }
        return "retried"
      }
      case "delete": {
        const ids = yield* repo.deleteDead({ ids: [id] })
        if (ids.length === 0) return yield* conflict(`item ${id} is ${current.state}: only dead items are deleted`)
        return "deleted"
      }
      case "cancel": {
        const [outcome] = yield* repo.cancel([id], { reason: "cancelled from the dashboard" })
        if (outcome === "unknown") return yield* new Problem({ status: 404, message: `no item ${id}` })
        if (outcome === "finished") return yield* conflict(`item ${id} is ${current.state}: it has finished`)
        return outcome
      }
      case "run-now": {
        const ids = yield* repo.runNow([id])
        if (ids.length === 0) return yield* conflict(`item ${id} is not scheduled (waiting for a later time)`)
        return "due now"
      }
    }
  }).pipe(Effect.mapError(toProblem))

/** A kind's limits as a form or JSON gives them: absent keeps, null (or "none") removes. */
export interface LimitsInput {
  readonly concurrency?: number | null | undefined
  readonly rate?: { readonly limit: number; readonly period: number } | null | undefined
}

/** Pause, resume or limits of a kind, through the repository (a bad kind or limit is a 400). */
export const actOnKind = (
  repo: Service,
  kind: string,
  action: { readonly _tag: "pause" } | { readonly _tag: "resume" } | { readonly _tag: "limits"; readonly limits: LimitsInput }
): Effect.Effect<string, Problem> => {
  switch (action._tag) {
    case "pause":
      return Effect.as(repo.pauseKind(kind), "paused").pipe(Effect.mapError(toProblem))
    case "resume":
      return Effect.as(repo.resumeKind(kind), "resumed").pipe(Effect.mapError(toProblem))
    case "limits":
      return Effect.as(repo.setKindLimits(kind, action.limits), "limits set").pipe(Effect.mapError(toProblem))
  }
}

const UNITS: ReadonlyArray<readonly [string, number]> = [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1000], ["ms", 1]]

/** A period as the limits form shows it and `readRate` reads it back: 1m, 30s, 500ms. */
export const periodText = (ms: number): string => {
  for (const [unit, size] of UNITS) if (ms % size === 0) return `${ms / size}${unit}`
  return `${ms}ms`
}

/** A rate as the form writes it, `N/PERIOD` (100/1m, 20/1s, 5/500ms); "none" or empty removes it. */
export const readRate = (text: string): Effect.Effect<LimitsInput["rate"], Problem> => {
  const trimmed = text.trim()
  if (trimmed === "" || trimmed === "none") return Effect.succeed(null)
  const match = /^(\d{1,9})\s*\/\s*(\d{1,12})\s*(ms|s|m|h|d)$/.exec(trimmed)
  const size = match === null ? undefined : UNITS.find(([unit]) => unit === match[3])?.[1]
  return match === null || size === undefined
    ? Effect.fail(new Problem({ status: 400, message: "invalid rate: write N/PERIOD, e.g. 100/1m or 20/1s (none removes it)" }))
    : Effect.succeed({ limit: Number(match[1]), period: Number(match[2]) * size })
}

/** A concurrency as the form writes it; "none" or empty removes it. */
export const readConcurrency = (text: string): Effect.Effect<number | null, Problem> => {
  const trimmed = text.trim()
  if (trimmed === "" || trimmed === "none") return Effect.succeed(null)
  return /^\d{1,9}$/.test(trimmed)
    ? Effect.succeed(Number(trimmed))
    : Effect.fail(new Problem({ status: 400, message: "invalid concurrency: a whole number (none removes it)" }))
}
