/**
 * What a dashboard and /metrics read beyond `stats` and `list`: the age of
 * each kind's oldest due item, finished and retried items per minute, items found by key
 * or by text (a bounded scan; each sql/insight*.ts says what it costs), who
 * holds back a PostgreSQL database's xmin horizon; and "run now", which makes
 * scheduled items due at once.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { ListState, SearchOptions } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type * as Wakeups from "../../Wakeups.js"
import * as Horizon from "../horizon.js"
import { TOP_KEY } from "../sql/historyList.js"
import { SEARCH_SCAN_CAP, type SearchFilters } from "../sql/insightSearch.js"
import type * as Storage from "../storage.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

const LIST_STATES: ReadonlyArray<ListState> = ["waiting", "scheduled", "running", "done", "dead", "cancelled"]

/** The longest text a search takes. */
export const SEARCH_TEXT_MAX = 200

type Filters = SearchFilters

const badCursor = new InvalidInput({ field: "cursor", reason: "is not a cursor a page of this search returned" })

// As list's cursor: the filters it belongs to and the id to go on below, as
// base64url JSON, checked so that a cursor of another search is refused.
const encodeCursor = (f: Filters, id: number) =>
  Buffer.from(JSON.stringify([2, f.state, f.kind, f.key, f.text, id]), "utf8").toString("base64url")

const decodeCursor = (cursor: unknown, f: Filters): Either.Either<number, InvalidInput> => {
  if (typeof cursor !== "string" || cursor.length === 0 || cursor.length > 4000) return Either.left(badCursor)
  try {
    const p: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"))
    if (
      Array.isArray(p) && p.length === 6 && p[0] === 2 && p[1] === f.state && p[2] === f.kind && p[3] === f.key &&
      p[4] === f.text && Number.isSafeInteger(p[5]) && p[5] >= 1
    ) return Either.right(p[5] as number)
  } catch {
    // falls through: not a cursor
  }
  return Either.left(badCursor)
}

const checkText = (text: unknown): Either.Either<string, InvalidInput> =>
  typeof text === "string" && text.length >= 1 && text.length <= SEARCH_TEXT_MAX && !text.includes("\u0000") &&
    text.isWellFormed()
    ? Either.right(text)
    : Either.left(new InvalidInput({ field: "text", reason: `must be a text of 1 to ${SEARCH_TEXT_MAX} characters` }))

const checkFilters = (o: SearchOptions) =>
  Effect.gen(function*() {
    const state = o.state ?? null
    if (state !== null && !LIST_STATES.includes(state)) {
      return yield* new InvalidInput({ field: "state", reason: `must be one of ${LIST_STATES.join(", ")}` })
    }
    const kind = o.kind === undefined ? null : yield* V.lift(V.checkKind(o.kind))
    const key = o.key === undefined ? null : yield* V.lift(V.checkKey(o.key))
    const text = o.text === undefined ? null : yield* V.lift(checkText(o.text))
    return { state, kind, key, text } satisfies Filters
  })

/** Checks ids of "run now" (as a cancel's: 1 to MAX_CANCEL_IDS positive integers). */
const checkIds = (ids: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > V.MAX_CANCEL_IDS) {
      return yield* new InvalidInput({ field: "ids", reason: `give 1 to ${V.MAX_CANCEL_IDS} ids` })
    }
    for (const id of ids) yield* V.lift(V.checkIntegerIn("ids", id, 1, Number.MAX_SAFE_INTEGER))
    return [...new Set(ids)]
  })

type Ops = Pick<
  Service,
  "oldestDue" | "groupsDue" | "finishedPerMinute" | "retriedPerMinute" | "totals" | "searchItems" | "horizon" | "runNow"
>

/** The read model's operations and "run now" over the storage. */
export const make = (store: Storage.Insights & Pick<Storage.Items, "itemRunNow">, wakeups: Wakeups.Service): Ops => {
  const search: Service["searchItems"] = (options = {}) =>
    Effect.gen(function*() {
      const f = yield* checkFilters(options)
      const limit = options.limit === undefined ? 50 : yield* V.lift(V.checkIntegerIn("limit", options.limit, 1, 1000))
      const before = options.cursor === undefined ? TOP_KEY : yield* V.lift(decodeCursor(options.cursor, f))
      const read = yield* store.insightSearch(before, f, limit + 1).pipe(Effect.mapError(storage("searchItems")))
      const items = read.items.slice(0, limit)
      // A full page goes on below its last item; a short one below the rows
      // it read, when it read a full window (older rows remain).
      const cursor = read.items.length > limit
        ? encodeCursor(f, items[items.length - 1].id)
        : read.full && read.floor !== null && read.floor > 1
        ? encodeCursor(f, read.floor)
        : null
      return { items, cursor, scanCap: SEARCH_SCAN_CAP }
    })
  const minutes = (given: number) => V.lift(V.checkIntegerIn("minutes", given, 1, 24 * 60))
  return {
    oldestDue: Effect.mapError(store.insightOldestDue, storage("oldestDue")),
    groupsDue: Effect.mapError(store.insightGroupsDue, storage("groupsDue")),
    finishedPerMinute: (given = 60) =>
      Effect.flatMap(minutes(given), (m) =>
        Effect.mapError(store.insightFinishedPerMinute(m * 60_000), storage("finishedPerMinute"))),
    retriedPerMinute: (given = 60) =>
      Effect.flatMap(minutes(given), (m) =>
        Effect.mapError(store.insightRetriedPerMinute(m * 60_000), storage("retriedPerMinute"))),
    totals: Effect.mapError(store.insightTotals, storage("totals")),
    searchItems: search,
    horizon: (threshold) =>
      Effect.flatMap(V.lift(Horizon.resolve(threshold)), (r) =>
        store.insightHorizon(r.ageMs, r.transactions).pipe(
          Effect.mapError(storage("horizon")),
          Effect.map(Option.map((holders) => ({ ...r, holders })))
        )),
    runNow: (ids) =>
      checkIds(ids).pipe(
        Effect.flatMap((unique) => Effect.mapError(store.itemRunNow(unique), storage("runNow"))),
        Effect.tap((moved) => (moved.length > 0 ? wakeups.enqueued : Effect.void))
      )
  }
}
