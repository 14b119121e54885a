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
 * table that is truly small), and the state test is written so that no
 * partial index's predicate follows from it (`state || '' = 'running'` means
 * the same as `state = 'running'`): no plan can read a partial index from end
 * to end.
 *
 * The token is the one given for that id, found by the id's place in the
 * batch. That was `array_position(ids, id)`, a linear search, so a batch cost
 * its size squared (issue 34): completing 3,000 cost 16.8 ms of the server's
 * CPU per 1,000 jobs against 9.2 in batches of 300. Now the batch is sent
 * sorted by id (`heldSorted`) and the place is `width_bucket(id, ids)`, a
 * binary search: the last place whose id is not above this one. It is a
 * function of the row, not a plan: the plan is the one above, node for node,
 * whatever the statistics say and whether the plan is custom or generic (a
 * hashed `= ANY` needs a constant array, a hashed subplan is chosen by the
 * estimated row count, which is the one issue 35 shows wrong). The place is
 * checked to hold this id (`ids[place] = id`), so a batch out of order could
 * only miss its rows, never match a token given for another item.
 * docs/benchmarks.md, "The fenced statements' cost per item (issue 34)".
 *
 * A batch can hold two claims of one item (a pool claimed back an item whose
 * lease ran out while it ran it; only the newer token can still match):
 * sorted by token within an id, the id's last place holds its highest token.
 */
import type { Fence } from "./rows.js"

/**
 * The place of the row `alias`'s id in `ids` (sorted, smallest first: see
 * `heldSorted`): its last place, found by binary search.
 */
const place = (alias: string, ids: string) => `width_bucket(${alias}.id, ${ids})`

/**
 * True for the row `alias` when it is running and holds the token that
 * `tokens` gives its id in `ids` (SQL arrays of the same length, pairwise,
 * ordered by `heldSorted`).
 */
export const pgHeld = (alias: string, ids = "$1::bigint[]", tokens = "$2::bigint[]") =>
  `${alias}.id = ANY(${ids}) AND (${ids})[${place(alias, ids)}] = ${alias}.id
  AND ${alias}.lease_seq = (${tokens})[${place(alias, ids)}]
  AND ${alias}.state || '' = 'running'`

/** The value given for the row `alias` in the SQL array `values`, pairwise with `ids` (ordered by `heldSorted`). */
export const pgGiven = (alias: string, values: string, ids = "$1::bigint[]") => `(${values})[${place(alias, ids)}]`

/**
 * The rows in the order `pgHeld` needs: by id, smallest first, and an id's
 * tokens smallest first (its last place holds its highest token; the others
 * cannot match).
 */
export const heldSorted = <Row extends Fence>(rows: ReadonlyArray<Row>): ReadonlyArray<Row> => {
  for (let i = 1; i < rows.length; i++) {
    const a = rows[i - 1]
    const b = rows[i]
    if (a.id > b.id || (a.id === b.id && a.token > b.token)) {
      return [...rows].sort((x, y) => x.id - y.id || x.token - y.token)
    }
  }
  return rows
}
