/**
 * Retry dead: a dead item becomes waiting again with a fresh attempt budget
 * and a fresh allowance of snoozes (an item dead of SnoozeLimit would else
 * be dead again at its first snooze). Its history stays: the attempts'
 * errors are kept (the retried attempts add to them, the oldest dropped past
 * 20), its finish time and result cleared (it can run again).
 * A dead item whose key a waiting item already holds (or a lower-id dead twin
 * retried by the same call) stays dead: the waiting item stands for it. So
 * one item per (kind, key) is retried, and none whose key a waiting item holds.
 * Each retried item is added to its kind's count of dead items that left the
 * dead state (docket_counts, 0012): the dead counter never falls. The update
 * checks the state again: two retries at once both pick a candidate from
 * their snapshots, and after waiting for the first one's lock PostgreSQL
 * re-checks only the update's own conditions, so without it the second would
 * retry the item again (and count its death twice).
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import { waitingTwin } from "./absorb.js"
import * as Now from "./clock.js"
import { deadSelection, pgAdd } from "./counts.js"
import type { Db } from "./db.js"
import type { DeadSelection } from "./rows.js"
import { NOTIFY_CHANNEL } from "./notify.js"

/** PostgreSQL: $1 the ids or NULL for all, $2 the kind or NULL for all; notifies idle pools. */
export const pg = `
WITH candidates AS (
  SELECT DISTINCT ON (d.kind, d.dedupe_key IS NULL, coalesce(d.dedupe_key, d.id::text)) d.id
  FROM docket_items d
  WHERE d.state = 'dead' AND ($1::bigint[] IS NULL OR d.id = ANY($1::bigint[]))
    AND ($2::text IS NULL OR d.kind = $2)
    AND (d.dedupe_key IS NULL OR NOT ${waitingTwin("d")})
  ORDER BY d.kind, d.dedupe_key IS NULL, coalesce(d.dedupe_key, d.id::text), d.id
), retried AS (
  UPDATE docket_items u
  SET state = 'waiting', attempts = 0, snoozes = 0, run_at = ${Now.pg}, claimed_by = NULL, lease_until = NULL,
      finished_at = NULL, result = NULL, updated_at = ${Now.pg}
  FROM candidates c WHERE u.id = c.id AND u.state = 'dead'
  RETURNING u.id, u.kind, 1 AS n
), ${pgAdd("counted", "retried", "'dead'")}
SELECT id, (SELECT pg_notify('${NOTIFY_CHANNEL}', 'retried')) IS NULL AS notified FROM retried`

/** SQLite: ?1 a JSON array of ids or NULL for all, ?2 the kind or NULL for all. */
export const sqlite = `
UPDATE docket_items
SET state = 'waiting', attempts = 0, snoozes = 0, run_at = ${Now.sqlite}, claimed_by = NULL, lease_until = NULL,
    finished_at = NULL, result = NULL, updated_at = ${Now.sqlite}
WHERE id IN (
  SELECT min(d.id) FROM docket_items d
  WHERE d.state = 'dead' AND (?1 IS NULL OR d.id IN (SELECT value FROM json_each(?1)))
    AND (?2 IS NULL OR d.kind = ?2)
    AND (d.dedupe_key IS NULL OR NOT ${waitingTwin("d")})
  GROUP BY d.kind, d.dedupe_key IS NULL, coalesce(d.dedupe_key, d.id)
)
RETURNING id, kind`

/** The operation: the ids retried, ascending. */
export type DeadRetry = (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, SqlError>

/** `deadRetry` for a dialect. */
export const make: (db: Db) => DeadRetry = deadSelection(pg, sqlite)
