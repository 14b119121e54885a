/**
 * Cancel: items a person stops, by id. A waiting or running item becomes
 * 'cancelled' (final: nothing claims it again), its last error the given
 * text, its finish time now (its retention counts from it), its lease
 * cleared, and its claim token (lease_seq) bumped, so every
 * later change its holder presents (complete, fail, release, extend) is
 * refused as stale. A done, dead or cancelled item is left as it is. One row per
 * existing id, with its outcome: 'cancelled' (it was waiting),
 * 'cancelledRunning' (it was running) or 'finished' (left as it was); an id
 * with no row names no item.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { intArray, op } from "./db.js"
import { CANCEL_CHANNEL, CANCEL_IDS_PER_NOTICE } from "./notify.js"
import type { IdRow } from "./rows.js"

/** What a cancel did to an item that exists: "cancelled", "cancelledRunning" or "finished". */
export interface CancelRow {
  readonly id: number | string
  readonly outcome: string
}

/**
 * The operation: cancels the waiting and running items of these ids in one
 * transaction, `error` their last error; one row per id that names an item.
 * On PostgreSQL the holders of the running ones are notified at commit.
 */
export type ItemCancelMany = (ids: ReadonlyArray<number>, error: string) => Effect.Effect<ReadonlyArray<CancelRow>, SqlError>

const SET = (now: string, error: string) =>
  `SET state = 'cancelled', last_error = ${error}, lease_seq = u.lease_seq + 1, claimed_by = NULL,
      lease_until = NULL, finished_at = ${now}, updated_at = ${now}`

/**
 * PostgreSQL, one statement: $1 the ids, $2 the error text. The rows are
 * locked first (a claim or a holder's write in flight is waited for, and the
 * state read after it; in id order, so two cancels of the same items cannot
 * deadlock). The running items cancelled are announced on the
 * cancel channel, their ids in notices of at most CANCEL_IDS_PER_NOTICE,
 * delivered at commit: the pools holding them stop their runs. A done item
 * is in docket_done (migrations/pg/0011_done_table.sql), never locked here:
 * nothing changes it but the pruner.
 */
export const pg = `
WITH target AS (
  SELECT i.id, i.state FROM docket_items i
  WHERE i.id = ANY($1::bigint[])
  ORDER BY i.id
  FOR UPDATE OF i
), cancelled AS (
  UPDATE docket_items u
  ${SET(Now.pg, "$2::text")}
  FROM target t
  WHERE u.id = t.id AND t.state IN ('waiting', 'running')
  RETURNING u.id, t.state AS was
), notices AS MATERIALIZED (
  SELECT pg_notify('${CANCEL_CHANNEL}', string_agg(r.id::text, ',' ORDER BY r.id)) AS sent
  FROM (SELECT c.id, (row_number() OVER (ORDER BY c.id) - 1) / ${CANCEL_IDS_PER_NOTICE} AS chunk
        FROM cancelled c WHERE c.was = 'running') r
  GROUP BY r.chunk
)
SELECT t.id,
  CASE WHEN c.id IS NULL THEN 'finished' WHEN c.was = 'running' THEN 'cancelledRunning' ELSE 'cancelled' END AS outcome,
  (SELECT count(*) FROM notices) AS notices
FROM target t LEFT JOIN cancelled c ON c.id = t.id
UNION ALL
SELECT d.id, 'finished', (SELECT count(*) FROM notices) FROM docket_done d WHERE d.id = ANY($1::bigint[])`

// SQLite runs three statements in one transaction, the first
// a write, so the transaction holds the write lock from its start: RETURNING
// gives only the new row, so which state an item was in is told by which
// update changed it. ?1 a JSON array of ids, ?2 the error text.
const sqliteCancel = (from: string, outcome: string) => `
UPDATE docket_items AS u
${SET(Now.sqlite, "?2")}
WHERE u.state = '${from}' AND u.id IN (SELECT value FROM json_each(?1))
RETURNING id, '${outcome}' AS outcome`

/** SQLite, first: the running items. */
export const sqliteRunning = sqliteCancel("running", "cancelledRunning")

/** SQLite, second: the waiting items. */
export const sqliteWaiting = sqliteCancel("waiting", "cancelled")

/** SQLite, third: every id that names an item (those the updates did not change are finished). */
export const sqliteExisting = `SELECT id FROM docket_items_all WHERE id IN (SELECT value FROM json_each(?1))`

/**
 * PostgreSQL, after the cancel: $1 the ids it returned no row for; those that
 * name an item (in a new snapshot). A complete that committed while the
 * cancel waited for the row's lock moved the item to docket_done after the
 * cancel's snapshot was taken, so the cancel saw it in neither table: it is
 * finished, not unknown.
 */
export const pgExisting = `SELECT id FROM docket_items_all WHERE id = ANY($1::bigint[])`

/** `itemCancelMany` for a dialect. */
export const make = op<ItemCancelMany>({
  // Cancel, then the ids it returned no row for read again in a new snapshot:
  // one completed while the cancel waited for its lock is in docket_done, and
  // finished (pgExisting).
  pg: ({ run }) => (ids, error) =>
    Effect.flatMap(run<CancelRow>(pg, [intArray(ids), error]), (rows) => {
      const answered = new Set(rows.map((r) => Number(r.id)))
      const missing = ids.filter((id) => !answered.has(id))
      if (missing.length === 0) return Effect.succeed(rows)
      return Effect.map(
        run<IdRow>(pgExisting, [intArray(missing)]),
        (found) => [...rows, ...found.map((f): CancelRow => ({ id: f.id, outcome: "finished" }))]
      )
    }),
  // Cancel in one transaction: the running ones (their holders are told by
  // their next renewal), then the waiting ones, then every id's outcome.
  sqlite: ({ run, transaction }) => (ids, error) => {
    const json = JSON.stringify(ids)
    return transaction(Effect.gen(function*() {
      const changed = [
        ...yield* run<CancelRow>(sqliteRunning, [json, error]),
        ...yield* run<CancelRow>(sqliteWaiting, [json, error])
      ]
      const existing = yield* run<IdRow>(sqliteExisting, [json])
      const byId = new Map(changed.map((r) => [Number(r.id), r.outcome]))
      return existing.map((r): CancelRow => ({ id: r.id, outcome: byId.get(Number(r.id)) ?? "finished" }))
    }))
  }
})
