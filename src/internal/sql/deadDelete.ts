/**
 * Delete dead: dead items removed for good, by id or all (optionally of one
 * kind); each removed item is added to its kind's count of dead items that
 * left the store (docket_counts, 0012), so the dead counter never falls.
 * On PostgreSQL, deleting a dead item of a group notifies idle pools: it may
 * have held its group (perGroup.onDead "hold"), whose next item can start now.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import { deadSelection, pgAdd } from "./counts.js"
import type { Db } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"
import type { DeadSelection } from "./rows.js"

/** PostgreSQL: $1 the ids or NULL for all, $2 the kind or NULL for all; notifies idle pools when a grouped item went. */
export const pg = `
WITH gone AS (
  DELETE FROM docket_items
  WHERE state = 'dead' AND ($1::bigint[] IS NULL OR id = ANY($1::bigint[])) AND ($2::text IS NULL OR kind = $2)
  RETURNING id, kind, group_key, 1 AS n
), ${pgAdd("counted", "gone", "'dead'")}
SELECT id, CASE WHEN group_key IS NULL THEN NULL ELSE (SELECT pg_notify('${NOTIFY_CHANNEL}', 'dead-deleted')) END AS notified
FROM gone`

/** SQLite: ?1 a JSON array of ids or NULL for all, ?2 the kind or NULL for all; counted in the same transaction. */
export const sqlite = `
DELETE FROM docket_items
WHERE state = 'dead' AND (?1 IS NULL OR id IN (SELECT value FROM json_each(?1))) AND (?2 IS NULL OR kind = ?2)
RETURNING id, kind`

/** The operation: the ids deleted, ascending. */
export type DeadDelete = (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, SqlError>

/** `deadDelete` for a dialect. */
export const make: (db: Db) => DeadDelete = deadSelection(pg, sqlite)
