/**
 * List: a page of items, newest first, with a keyset cursor (no OFFSET: a
 * page costs the same however deep it is, and items added or pruned between
 * pages neither repeat nor skip the others).
 *
 * Finished states (done, dead, cancelled) are ordered by (finished_at, id)
 * descending, walking docket_items_finished backwards from the cursor's key
 * (migrations/pg/0007_history.sql) and, on PostgreSQL, docket_done_finished
 * (0011: done items live there); the other listings by id descending (the
 * primary keys). Every listing reads docket_items_all, the two tables merged
 * in key order. The first page's key is above every stored one, so each
 * text has one form (no "cursor IS NULL OR", which no index serves).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Item } from "../../Domain.js"
import * as Now from "./clock.js"
import { ITEM_COLUMNS } from "./columns.js"
import { op, type Run } from "./db.js"
import { type ItemRow, toItems } from "./rows.js"

/**
 * One checked page request (internal/store/history.ts makes it): a finished
 * state by (finished_at, id) below the cursor's key, or the others by id
 * below the cursor's id. TOP_KEY for a first page.
 */
export type ListQuery =
  | {
    readonly by: "finished"
    readonly state: "done" | "dead" | "cancelled"
    readonly kind: string | null
    readonly finishedBefore: number
    readonly idBefore: number
    readonly limit: number
  }
  | {
    readonly by: "all" | "waiting" | "scheduled" | "running"
    readonly kind: string | null
    readonly idBefore: number
    readonly limit: number
  }

/** The operation: a page of items, newest first. */
export type HistoryList = (query: ListQuery) => Effect.Effect<ReadonlyArray<Item>, SqlError>

/** The key of a first page: above every id and every finish time. */
export const TOP_KEY = Number.MAX_SAFE_INTEGER

// The parameter marks of each dialect: the finished texts take (state, kind,
// finish time, id, limit), the texts by id (kind, id, limit).
interface Marks {
  readonly kind: string
  readonly state: string
  readonly finished: string
  readonly id: string
  readonly limit: string
}
const PG: Marks = { state: "$1", kind: "$2::text", finished: "$3::bigint", id: "$4::bigint", limit: "$5" }
const PG_BY_ID: Marks = { state: "", kind: "$1::text", finished: "", id: "$2::bigint", limit: "$3" }
const SQLITE: Marks = { state: "?1", kind: "?2", finished: "?3", id: "?4", limit: "?5" }
const SQLITE_BY_ID: Marks = { state: "", kind: "?1", finished: "", id: "?2", limit: "?3" }

const finished = (m: Marks) => `
SELECT ${ITEM_COLUMNS} FROM docket_items_all
WHERE state = ${m.state} AND finished_at IS NOT NULL AND (${m.kind} IS NULL OR kind = ${m.kind})
  AND (finished_at, id) < (${m.finished}, ${m.id})
ORDER BY finished_at DESC, id DESC
LIMIT ${m.limit}`

// `where` is one of the constant conditions below, never input.
const byId = (m: Marks, where: string) => `
SELECT ${ITEM_COLUMNS} FROM docket_items_all
WHERE ${where} AND (${m.kind} IS NULL OR kind = ${m.kind}) AND id < ${m.id}
ORDER BY id DESC
LIMIT ${m.limit}`

const statements = (m: Marks, b: Marks, now: string) => ({
  finished: finished(m),
  all: byId(b, "true"),
  waiting: byId(b, `state = 'waiting' AND run_at <= ${now}`),
  scheduled: byId(b, `state = 'waiting' AND run_at > ${now}`),
  running: byId(b, "state = 'running'")
})

/**
 * PostgreSQL. `finished`: $1 the state, $2 the kind or NULL, $3 and $4 the
 * cursor's finish time and id (TOP_KEY for the first page), $5 the page size.
 * The others: $1 the kind or NULL, $2 the cursor's id, $3 the page size.
 */
export const pg = statements(PG, PG_BY_ID, Now.pg)

/** SQLite: the same parameters, numbered ?N. */
export const sqlite = statements(SQLITE, SQLITE_BY_ID, Now.sqlite)

const lister = (texts: typeof pg) => ({ run }: { readonly run: Run }): HistoryList => (q) =>
  Effect.map(
    q.by === "finished"
      ? run<ItemRow>(texts.finished, [q.state, q.kind, q.finishedBefore, q.idBefore, q.limit])
      : run<ItemRow>(texts[q.by], [q.kind, q.idBefore, q.limit]),
    toItems
  )

/** `historyList` for a dialect. */
export const make = op<HistoryList>({ pg: lister(pg), sqlite: lister(sqlite) })
