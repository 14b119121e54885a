/**
 * PostgreSQL: the running rows a batch of claims holds, found by primary key
 * probes whatever the planner believes of the table (issue 35).
 *
 * The fenced statements (complete, extend, fail, release, snooze) used to
 * join docket_items with `unnest(ids, tokens)` on `id` and `lease_seq`,
 * with `state = 'running'`. Their plans follow the statistics, and while a
 * snapshot held by another session keeps vacuum from removing anything, the
 * statistics of a queue that autovacuum analysed while it was nearly empty say
 * "one row" of a table whose indexes hold hundreds of thousands of dead
 * entries. The planner then reads the whole of docket_items_lease (a partial
 * index whose predicate `state = 'running'` implies) or the primary key into a
 * hash join: measured, 190,000-250,000 entries read per complete of 500 items
 * by round 6 of W9, 120 ms instead of 5; a nested loop over the unnest, its
 * other choice, rescanned the array for every row (213 ms).
 *
 * So the rows are selected without a join: `id = ANY(ids)` is a probe of the
 * primary key per id (the only index with that column; a sequential scan, the
 * other path, is priced by the table's real size, so it is chosen only for a
 * table that is truly small), the token is the one given for that id
 * (`array_position`), and the state test is written so that no partial index's
 * predicate follows from it (`state || '' = 'running'` means the same as
 * `state = 'running'`): no plan can read a partial index from end to end.
 *
 * `array_position` finds an id's first place in the array, and a batch can
 * hold two claims of one item (a pool claimed back an item whose lease ran out
 * while it ran it; only the newer token can still match): `heldFirst` puts each
 * id's highest token first.
 */
import type { Fence } from "./rows.js"

/**
 * True for the row `alias` when it is running and holds the token that
 * `tokens` gives its id in `ids` (SQL arrays of the same length, pairwise).
 */
export const pgHeld = (alias: string, ids = "$1::bigint[]", tokens = "$2::bigint[]") =>
  `${alias}.id = ANY(${ids}) AND ${alias}.lease_seq = (${tokens})[array_position(${ids}, ${alias}.id)]
  AND ${alias}.state || '' = 'running'`

/** The value given for the row `alias` in the SQL array `values`, pairwise with `ids`. */
export const pgGiven = (alias: string, values: string, ids = "$1::bigint[]") =>
  `(${values})[array_position(${ids}, ${alias}.id)]`

/**
 * The rows in an order `pgHeld` can use: as given when no id repeats (the
 * common case), else each id's highest token first (the others cannot match).
 */
export const heldFirst = <Row extends Fence>(rows: ReadonlyArray<Row>): ReadonlyArray<Row> => {
  const seen = new Set<number>()
  for (const row of rows) {
    if (seen.has(row.id)) return [...rows].sort((a, b) => a.id - b.id || b.token - a.token)
    seen.add(row.id)
  }
  return rows
}
