/**
 * The read model of a dashboard and of /metrics (internal/store/insights.ts):
 * items by state, kind, dedupe key and a text in the payload or last error,
 * newest first by id, a page at a time. Two statements: the window's floor,
 * then the page. Each walks the primary key backwards from the cursor, at most
 * SEARCH_SCAN_CAP rows per page whatever the filters (a text search cannot use
 * an index; bounding the rows it reads bounds its cost).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Item, ListState } from "../../Domain.js"
import * as Now from "./clock.js"
import { ITEM_COLUMNS } from "./columns.js"
import { type Run, texts } from "./db.js"
import { type ItemRow, num, numOrNull, toItems } from "./rows.js"

/** The most rows one search page reads (below its cursor, newest first). */
export const SEARCH_SCAN_CAP = 10_000

// The lowest id of the window a page reads, and how many rows it holds.
const searchFloor = (before: string, cap: string) => `
SELECT min(id) AS floor, count(*) AS n FROM (
  SELECT id FROM docket_items_all WHERE id < ${before} ORDER BY id DESC LIMIT ${cap}
) recent`

interface SearchMarks {
  readonly before: string
  readonly floor: string
  readonly state: string
  readonly kind: string
  readonly key: string
  readonly text: string
  readonly limit: string
}

// The state as `list` reads it: waiting is due now, scheduled due later.
// The text is matched case-insensitively in the payload and the last error.
const search = (m: SearchMarks, now: string, position: (hay: string, needle: string) => string) => `
SELECT ${ITEM_COLUMNS} FROM docket_items_all
WHERE id < ${m.before} AND id >= ${m.floor}
  AND (${m.state} IS NULL
    OR (${m.state} = 'waiting' AND state = 'waiting' AND run_at <= ${now})
    OR (${m.state} = 'scheduled' AND state = 'waiting' AND run_at > ${now})
    OR (${m.state} NOT IN ('waiting', 'scheduled') AND state = ${m.state}))
  AND (${m.kind} IS NULL OR kind = ${m.kind})
  AND (${m.key} IS NULL OR dedupe_key = ${m.key})
  AND (${m.text} IS NULL OR ${position("lower(payload)", `lower(${m.text})`)} > 0
    OR ${position("lower(coalesce(last_error, ''))", `lower(${m.text})`)} > 0)
ORDER BY id DESC
LIMIT ${m.limit}`

/** PostgreSQL texts. */
export const pg = {
  /** $1 the cursor's id, $2 the cap. */
  searchFloor: searchFloor("$1::bigint", "$2"),
  /** $1 cursor id, $2 floor, $3 state, $4 kind, $5 key, $6 text (each NULL for any), $7 the page size. */
  search: search(
    { before: "$1::bigint", floor: "$2::bigint", state: "$3::text", kind: "$4::text", key: "$5::text", text: "$6::text", limit: "$7" },
    Now.pg,
    (hay, needle) => `strpos(${hay}, ${needle})`
  )
}

/** SQLite texts: the same parameters, numbered ?N. */
export const sqlite = {
  searchFloor: searchFloor("?1", "?2"),
  search: search(
    { before: "?1", floor: "?2", state: "?3", kind: "?4", key: "?5", text: "?6", limit: "?7" },
    Now.sqlite,
    (hay, needle) => `instr(${hay}, ${needle})`
  )
}

/** Checked filters of a search (null: any). */
export interface SearchFilters {
  readonly state: ListState | null
  readonly kind: string | null
  readonly key: string | null
  readonly text: string | null
}

/**
 * One page: the items (up to `limit`, newest first) below id `before`, among
 * the SEARCH_SCAN_CAP rows below it; `floor` the lowest id of those rows
 * (null when there are none), `full` whether there were that many.
 */
export interface SearchRead {
  readonly items: ReadonlyArray<Item>
  readonly floor: number | null
  readonly full: boolean
}

/** The operation. */
export type InsightSearch = (before: number, filters: SearchFilters, limit: number) => Effect.Effect<SearchRead, SqlError>

/** `insightSearch` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): InsightSearch => (before, f, limit) =>
  Effect.gen(function*() {
    const [window] = yield* run<{ floor: number | string | null; n: number | string }>(text.searchFloor, [before, SEARCH_SCAN_CAP])
    const floor = numOrNull(window?.floor)
    if (floor === null) return { items: [], floor: null, full: false }
    const rows = yield* run<ItemRow>(text.search, [before, floor, f.state, f.kind, f.key, f.text, limit])
    return { items: toItems(rows), floor, full: num(window.n) >= SEARCH_SCAN_CAP }
  }))
