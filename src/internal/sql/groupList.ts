/**
 * A page of a kind's groups with unfinished items (`docket group list`), in
 * group order after a cursor (the previous page's last group): each with its
 * items by state, its first item (an ordered group's head: what the rest wait
 * behind) and the earliest due time among its waiting items.
 *
 * A seek, not a scan, whatever the number of groups: the page walks the
 * partial index docket_items_group (kind, group_key, id; unfinished grouped
 * items only, migrations/pg/0017_groups.sql) from the cursor, and reads the
 * rows of the page's groups only.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { texts } from "./db.js"
import { num, numOrNull } from "./rows.js"

/** One group's row. */
export interface GroupRow {
  readonly group_key: string
  readonly due: number | string
  readonly scheduled: number | string
  readonly running: number | string
  readonly retrying: number | string
  readonly next_due: number | string | null
  readonly head_id: number | string
  readonly head_state: string
  readonly head_attempts: number | string
  readonly head_run_at: number | string
  readonly head_error: string | null
  readonly ordered: boolean | number | null
}

/** A group as the store decodes it. */
export interface GroupRecord {
  readonly group: string
  readonly due: number
  readonly scheduled: number
  readonly running: number
  readonly retrying: number
  readonly nextDueAt: number | null
  /** The kind's groups are ordered (`perGroup.ordered`). */
  readonly ordered: boolean
  readonly head: {
    readonly id: number
    readonly state: "waiting" | "running"
    readonly attempts: number
    readonly runAt: number
    readonly lastError: string | null
  }
}

/** The operation: up to `limit` groups of `kind` after `after` (none: from the first); only `only`, if given. */
export type GroupList = (
  kind: string,
  after: string | null,
  limit: number,
  only: string | null
) => Effect.Effect<ReadonlyArray<GroupRecord>, SqlError>

const listSql = (now: string, p: (n: number) => string) => `
WITH page AS (
  SELECT group_key,
    sum(CASE WHEN state = 'waiting' AND run_at <= ${now} THEN 1 ELSE 0 END) AS due,
    sum(CASE WHEN state = 'waiting' AND run_at > ${now} THEN 1 ELSE 0 END) AS scheduled,
    sum(CASE WHEN state = 'running' THEN 1 ELSE 0 END) AS running,
    sum(CASE WHEN state = 'waiting' AND attempts > 0 THEN 1 ELSE 0 END) AS retrying,
    min(CASE WHEN state = 'waiting' THEN run_at END) AS next_due,
    min(id) AS head_id
  FROM docket_items
  WHERE kind = ${p(1)} AND group_key IS NOT NULL AND state IN ('waiting', 'running')
    AND (${p(2)} IS NULL OR group_key > ${p(2)}) AND (${p(4)} IS NULL OR group_key = ${p(4)})
  GROUP BY group_key
  ORDER BY group_key
  LIMIT ${p(3)}
)
SELECT page.*, h.state AS head_state, h.attempts AS head_attempts, h.run_at AS head_run_at, h.last_error AS head_error,
  (SELECT group_ordered FROM docket_kinds WHERE kind = ${p(1)}) AS ordered
FROM page JOIN docket_items h ON h.id = page.head_id
ORDER BY page.group_key`

/** PostgreSQL: $1 kind, $2 the cursor (or NULL), $3 the page's size, $4 one group only (or NULL). */
export const pg = listSql(Now.pg, (n) => (n === 2 || n === 4 ? `$${n}::text` : `$${n}`))

/** SQLite: as `pg`. */
export const sqlite = listSql(Now.sqlite, (n) => `?${n}`)

const toRecord = (row: GroupRow): GroupRecord => ({
  group: row.group_key,
  due: num(row.due),
  scheduled: num(row.scheduled),
  running: num(row.running),
  retrying: num(row.retrying),
  nextDueAt: numOrNull(row.next_due),
  ordered: row.ordered === true || row.ordered === 1,
  head: {
    id: num(row.head_id),
    state: row.head_state === "running" ? "running" : "waiting",
    attempts: num(row.head_attempts),
    runAt: num(row.head_run_at),
    lastError: row.head_error
  }
})

/** `groupList` for a dialect. */
export const make = texts<string, GroupList>(pg, sqlite, (run, text) => (kind, after, limit, only) =>
  Effect.map(run<GroupRow>(text, [kind, after, limit, only]), (rows) => rows.map(toRecord)))
