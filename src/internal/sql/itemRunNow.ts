/**
 * Run now: scheduled items (waiting, due later) due at once, by id; others
 * (due already, running, finished, unknown) are left as they are. Returns
 * the ids moved; on PostgreSQL idle pools are notified at commit.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"
import { type IdRow, toIds } from "./rows.js"

/** PostgreSQL: $1 the ids: scheduled ones become due now; notifies idle pools. */
export const pg = `
WITH moved AS (
  UPDATE docket_items SET run_at = ${Now.pg}, updated_at = ${Now.pg}
  WHERE id = ANY($1::bigint[]) AND state = 'waiting' AND run_at > ${Now.pg}
  RETURNING id
)
SELECT id, (SELECT pg_notify('${NOTIFY_CHANNEL}', 'run-now')) IS NULL AS notified FROM moved`

/** SQLite: ?1 a JSON array of ids. */
export const sqlite = `
UPDATE docket_items SET run_at = ${Now.sqlite}, updated_at = ${Now.sqlite}
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'waiting' AND run_at > ${Now.sqlite}
RETURNING id`

/** The operation: the ids moved, ascending. */
export type ItemRunNow = (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<number>, SqlError>

/** `itemRunNow` for a dialect. */
export const make = op<ItemRunNow>({
  pg: ({ run }) => (ids) => Effect.map(run<IdRow>(pg, [ids]), toIds),
  sqlite: ({ run }) => (ids) => Effect.map(run<IdRow>(sqlite, [JSON.stringify(ids)]), toIds)
})
