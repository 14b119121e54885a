/**
 * Pausing and resuming one group of a kind (docket_groups, and the kind's
 * count of paused groups in docket_kinds.paused_groups:
 * migrations/pg/0019_group_controls.sql says why both, and why the count
 * stays exact under concurrent pauses). A pause adds the rows its insert made
 * (none when the group was paused already), a resume subtracts the rows its
 * delete removed, in one statement each. A resume may let items start: on
 * PostgreSQL it notifies the channel idle pools listen on (sent at the
 * change's commit).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"

/** PostgreSQL pause: $1 kind, $2 group. The kind's row made if needed. */
export const pgPause = `
WITH added AS (
  INSERT INTO docket_groups (kind, group_key, paused_at) VALUES ($1, $2, ${Now.pg})
  ON CONFLICT (kind, group_key) DO NOTHING
  RETURNING kind
)
INSERT INTO docket_kinds (kind, paused_groups, updated_at)
SELECT $1, (SELECT count(*) FROM added), ${Now.pg}
ON CONFLICT (kind) DO UPDATE SET paused_groups = docket_kinds.paused_groups + excluded.paused_groups,
  updated_at = excluded.updated_at
RETURNING kind`

/** PostgreSQL resume: $1 kind, $2 group. Wakes idle pools when the group was paused. */
export const pgResume = `
WITH removed AS (
  DELETE FROM docket_groups WHERE kind = $1 AND group_key = $2 RETURNING kind
)
UPDATE docket_kinds k SET paused_groups = k.paused_groups - (SELECT count(*) FROM removed), updated_at = ${Now.pg}
WHERE k.kind = $1 AND EXISTS (SELECT 1 FROM removed)
RETURNING k.kind, pg_notify('${NOTIFY_CHANNEL}', 'kinds') AS woke`

/**
 * SQLite pause: ?1 kind, ?2 group, then the kind's count made again (?1 only).
 * SQLite serialises writers, so the two statements in one transaction (which
 * starts with a write: db.ts) see no other writer between them.
 */
export const sqlitePause = [
  `INSERT INTO docket_groups (kind, group_key, paused_at) VALUES (?1, ?2, ${Now.sqlite})
   ON CONFLICT (kind, group_key) DO NOTHING`,
  `INSERT INTO docket_kinds (kind, paused_groups, updated_at)
   SELECT ?1, (SELECT count(*) FROM docket_groups WHERE kind = ?1), ${Now.sqlite}
   ON CONFLICT (kind) DO UPDATE SET paused_groups = excluded.paused_groups, updated_at = excluded.updated_at`
] as const

/** SQLite resume: ?1 kind, ?2 group (the count: ?1 only). */
export const sqliteResume = [
  `DELETE FROM docket_groups WHERE kind = ?1 AND group_key = ?2`,
  `UPDATE docket_kinds SET paused_groups = (SELECT count(*) FROM docket_groups WHERE kind = ?1), updated_at = ${Now.sqlite}
   WHERE kind = ?1`
] as const

/** The operation: pauses or resumes one group of the kind. */
export type GroupSetPaused = (kind: string, group: string, paused: boolean) => Effect.Effect<void, SqlError>

/** `groupSetPaused` for a dialect. */
export const make = op<GroupSetPaused>({
  pg: ({ run }) => (kind, group, paused) => Effect.asVoid(run(paused ? pgPause : pgResume, [kind, group])),
  sqlite: ({ run, transaction }) => (kind, group, paused) => {
    const [change, count] = paused ? sqlitePause : sqliteResume
    return transaction(Effect.zipRight(run(change, [kind, group]), Effect.asVoid(run(count, [kind]))))
  }
})
