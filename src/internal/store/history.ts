/**
 * The history of finished items: how long each finished state is kept (the
 * retention, checked once when the service is built), pruning what outlived
 * it, and listing items a page at a time, newest first, with an opaque cursor.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { FinishedState, Item, ListOptions, ListState, PruneResult, Retention } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import { type ListQuery, TOP_KEY } from "../sql/historyList.js"
import type { Storage } from "../storage.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** A finished state's retention in ms; null keeps it for ever. */
export interface ResolvedRetention {
  readonly done: number | null
  readonly cancelled: number | null
  readonly dead: number | null
}

/** The defaults: done and cancelled a day (enough to look into last night's run), dead until a person acts. */
export const DEFAULT_RETENTION: ResolvedRetention = { done: 24 * 3600 * 1000, cancelled: 24 * 3600 * 1000, dead: null }

/**
 * How long the retry counts per minute are kept (docket_minute_counts): a
 * day, the longest window `retriedPerMinute` reads, whatever the items'
 * retention (a done retention of 0 keeps no done row, yet the retries of the
 * last hour still chart; one kept for ever would keep a few rows per kind
 * and minute for nothing any read asks for).
 */
export const MINUTE_COUNTS_KEPT_MS = 24 * 3600 * 1000

const FINISHED: ReadonlyArray<FinishedState> = ["done", "cancelled", "dead"]

/** One state's retention: "forever", or a duration from 0 to about 100 years. */
export const checkRetentionOf = (state: FinishedState, value: unknown): Either.Either<number | null, InvalidInput> => {
  if (value === "forever") return Either.right(null)
  if (typeof value === "string" && value.trim() === "forever") return Either.right(null)
  return Either.mapLeft(
    V.checkMillis("retention", value, 0, V.MAX_DELAY_MS),
    (e) => new InvalidInput({ field: "retention", reason: `${state}: ${e.reason} (or "forever")` })
  )
}

/** The retention with its defaults; a bad value is an InvalidInput naming the state. */
export const resolveRetention = (retention: Retention = {}): Either.Either<ResolvedRetention, InvalidInput> =>
  Either.gen(function*() {
    const out: Record<FinishedState, number | null> = { ...DEFAULT_RETENTION }
    for (const state of FINISHED) {
      const given = retention[state]
      if (given !== undefined) out[state] = yield* checkRetentionOf(state, given)
    }
    return out
  })

/** Rows one prune statement deletes at most: a few ms of work, short locks. */
export const PRUNE_BATCH = 1000

const LIST_STATES: ReadonlyArray<ListState> = ["waiting", "scheduled", "running", "done", "dead", "cancelled"]
const isFinished = (state: ListState | null): state is FinishedState =>
  state === "done" || state === "dead" || state === "cancelled"

// A cursor is the listing it belongs to (state, kind) and the last item's key,
// as base64url JSON: opaque to callers, so its form may change, and checked,
// so a cursor of another listing is refused rather than silently read wrong.
interface CursorKey {
  readonly finishedAt: number
  readonly id: number
}

const encodeCursor = (state: ListState | null, kind: string | null, item: Item): string =>
  Buffer.from(JSON.stringify([1, state, kind, item.finishedAt ?? 0, item.id]), "utf8").toString("base64url")

const badCursor = (reason: string) => new InvalidInput({ field: "cursor", reason })

const decodeCursor = (cursor: unknown, state: ListState | null, kind: string | null): Either.Either<CursorKey, InvalidInput> => {
  if (typeof cursor !== "string" || cursor.length === 0 || cursor.length > 2000) {
    return Either.left(badCursor("must be the cursor a previous page returned"))
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"))
  } catch {
    return Either.left(badCursor("is not a cursor a page returned"))
  }
  if (
    !Array.isArray(parsed) || parsed.length !== 5 || parsed[0] !== 1 ||
    !Number.isSafeInteger(parsed[3]) || !Number.isSafeInteger(parsed[4]) || parsed[4] < 1
  ) {
    return Either.left(badCursor("is not a cursor a page returned"))
  }
  if (parsed[1] !== state || parsed[2] !== kind) {
    return Either.left(badCursor("belongs to another listing (give the same state and kind as the page it came from)"))
  }
  return Either.right({ finishedAt: parsed[3], id: parsed[4] })
}

/** Checks the options and makes the storage's query (the cursor's key, or TOP_KEY for the first page). */
const toQuery = (options: ListOptions) =>
  Effect.gen(function*() {
    const state = options.state ?? null
    if (state !== null && !LIST_STATES.includes(state)) {
      return yield* new InvalidInput({ field: "state", reason: `must be one of ${LIST_STATES.join(", ")}` })
    }
    const kind = options.kind === undefined ? null : yield* V.lift(V.checkKind(options.kind))
    const limit = options.limit === undefined ? 50 : yield* V.lift(V.checkIntegerIn("limit", options.limit, 1, 1000))
    const key = options.cursor === undefined
      ? { finishedAt: TOP_KEY, id: TOP_KEY }
      : yield* V.lift(decodeCursor(options.cursor, state, kind))
    // One more than the page: whether there is a next page is known without another query.
    const query: ListQuery = isFinished(state)
      ? { by: "finished", state, kind, finishedBefore: key.finishedAt, idBefore: key.id, limit: limit + 1 }
      : { by: state ?? "all", kind, idBefore: key.id, limit: limit + 1 }
    return { state, kind, limit, query }
  })

/** `list` and `prune` over the storage, with the service's retention. */
export const make = (
  store: Pick<Storage, "historyList" | "historyPrune" | "historyPruneMinuteCounts">,
  retention: ResolvedRetention
): Pick<Service, "list" | "prune"> => ({
  list: (options = {}) =>
    Effect.gen(function*() {
      const { kind, limit, query, state } = yield* toQuery(options)
      const rows = yield* store.historyList(query).pipe(Effect.mapError(storage("list")))
      const items = rows.slice(0, limit)
      const more = rows.length > limit
      return { items, cursor: more ? encodeCursor(state, kind, items[items.length - 1]) : null }
    }),
  // One statement per state kept for a while (a state kept for ever has none);
  // the pruner repeats while a batch comes back full. Then one batch of the
  // retry counts older than a day (not reported: the result counts items;
  // a batch covers 1,000 kind-minutes, far more than a pass interval adds).
  prune: Effect.gen(function*() {
    const result: Record<FinishedState, number> = { done: 0, cancelled: 0, dead: 0 }
    for (const state of FINISHED) {
      const ms = retention[state]
      if (ms === null) continue
      result[state] = yield* store.historyPrune(state, ms, PRUNE_BATCH).pipe(Effect.mapError(storage("prune")))
    }
    yield* store.historyPruneMinuteCounts(MINUTE_COUNTS_KEPT_MS, PRUNE_BATCH).pipe(Effect.mapError(storage("prune")))
    return result satisfies PruneResult
  })
})
