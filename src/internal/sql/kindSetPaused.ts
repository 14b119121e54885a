/**
 * Pausing and resuming a kind (docket_kinds, migrations/pg/0006_control.sql):
 * its row made if needed. A resume may let items start: on PostgreSQL it
 * notifies the channel idle pools listen on, so they claim at once (sent at
 * the change's commit).
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"

const wake = `pg_notify('${NOTIFY_CHANNEL}', 'kinds')`

/** PostgreSQL: $1 kind, $2 paused. Creates the row if needed; a resume wakes idle pools. */
export const pg = `
WITH changed AS (
  INSERT INTO docket_kinds (kind, paused, updated_at) VALUES ($1, $2, ${Now.pg})
  ON CONFLICT (kind) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
  RETURNING kind, paused
)
SELECT kind, paused, CASE WHEN NOT paused THEN ${wake} END AS woke FROM changed`

/** SQLite: ?1 kind, ?2 paused (0 or 1). */
export const sqlite = `
INSERT INTO docket_kinds (kind, paused, updated_at) VALUES (?1, ?2, ${Now.sqlite})
ON CONFLICT (kind) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
RETURNING kind, paused`

/** The operation: pauses or resumes the kind. */
export type KindSetPaused = (kind: string, paused: boolean) => Effect.Effect<ReadonlyArray<{ readonly kind: string }>, SqlError>

/** `kindSetPaused` for a dialect. */
export const make = op<KindSetPaused>({
  pg: ({ run }) => (kind, paused) => run<{ kind: string }>(pg, [kind, paused]),
  sqlite: ({ run }) => (kind, paused) => run<{ kind: string }>(sqlite, [kind, paused ? 1 : 0])
})
