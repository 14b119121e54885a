/**
 * A kind's group limits (`perGroup`: docket_kinds.group_concurrency and
 * group_ordered, migrations/pg/0017_groups.sql) as a handler declares them:
 * every pool writes its handlers' declarations when it starts (the last to
 * start wins), and a handler that declares none clears them. Only a change
 * writes; a change wakes idle pools on PostgreSQL (a NOTIFY at its commit),
 * since a limit raised or removed lets items start. (No person's setting
 * yet: `docket kind set --per-group-concurrency` is not built.)
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"

/** The operation: writes the kind's group limits (null concurrency: none); true when they changed. */
export type KindSetGroups = (kind: string, concurrency: number | null, ordered: boolean) => Effect.Effect<boolean, SqlError>

/** PostgreSQL: $1 kind, $2 group concurrency or NULL, $3 ordered. A kind with no row and nothing declared gets none. */
export const pg = `
WITH changed AS (
  INSERT INTO docket_kinds (kind, group_concurrency, group_ordered, updated_at)
  SELECT $1, $2, $3, ${Now.pg}
  WHERE $2::int IS NOT NULL OR EXISTS (SELECT 1 FROM docket_kinds WHERE kind = $1)
  ON CONFLICT (kind) DO UPDATE SET group_concurrency = excluded.group_concurrency,
    group_ordered = excluded.group_ordered, updated_at = excluded.updated_at
  WHERE (docket_kinds.group_concurrency, docket_kinds.group_ordered)
        IS DISTINCT FROM (excluded.group_concurrency, excluded.group_ordered)
  RETURNING kind
)
SELECT kind, pg_notify('${NOTIFY_CHANNEL}', 'kinds') AS woke FROM changed`

/** SQLite: as `pg`; ?3 0 or 1. */
export const sqlite = `
INSERT INTO docket_kinds (kind, group_concurrency, group_ordered, updated_at)
SELECT ?1, ?2, ?3, ${Now.sqlite}
WHERE ?2 IS NOT NULL OR EXISTS (SELECT 1 FROM docket_kinds WHERE kind = ?1)
ON CONFLICT (kind) DO UPDATE SET group_concurrency = excluded.group_concurrency,
  group_ordered = excluded.group_ordered, updated_at = excluded.updated_at
WHERE docket_kinds.group_concurrency IS NOT excluded.group_concurrency
  OR docket_kinds.group_ordered IS NOT excluded.group_ordered
RETURNING kind`

/** `kindSetGroups` for a dialect. */
export const make = op<KindSetGroups>({
  pg: ({ run }) => (kind, concurrency, ordered) =>
    Effect.map(run<{ kind: string }>(pg, [kind, concurrency, ordered]), (rows) => rows.length > 0),
  sqlite: ({ run }) => (kind, concurrency, ordered) =>
    Effect.map(run<{ kind: string }>(sqlite, [kind, concurrency, ordered ? 1 : 0]), (rows) => rows.length > 0)
})
