/**
 * A kind's group settings (`perGroup`: docket_kinds.group_concurrency,
 * group_ordered (migrations/pg/0017_groups.sql), group_on_failure,
 * group_on_dead, group_rate_limit and group_rate_period_ms (0019_group_controls.sql)) as a handler declares them: every
 * pool writes its handlers' declarations when it starts (the last to start
 * wins), and a handler that declares none clears them; the concurrency and
 * the rate are left as they are where a person set them
 * (group_limits_set_by 'person': ./kindSetGroupLimits.ts). Only a change writes;
 * a change wakes idle pools on PostgreSQL (a NOTIFY at its commit), since a
 * limit raised or removed lets items start.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"

/** What a declaration writes (null: none; then the defaults of 0017 and 0019). */
export interface GroupSettingsRow {
  readonly concurrency: number
  readonly ordered: boolean
  readonly onFailure: "wait" | "continue"
  readonly onDead: "release" | "hold"
  readonly rateLimit: number | null
  readonly ratePeriodMs: number | null
}

// A limit a person set is kept: the declaration's value only while the code owns the limits.
const kept = (column: string) =>
  `${column} = CASE WHEN docket_kinds.group_limits_set_by = 'person' THEN docket_kinds.${column} ELSE excluded.${column} END`
// The stored limit compared with the declaration's: a person's counts as equal (no change to write).
const mine = (column: string) =>
  `CASE WHEN docket_kinds.group_limits_set_by = 'person' THEN excluded.${column} ELSE docket_kinds.${column} END`

/** The operation: writes the kind's group settings (null: none); true when they changed. */
export type KindSetGroups = (kind: string, settings: GroupSettingsRow | null) => Effect.Effect<boolean, SqlError>

/**
 * PostgreSQL: $1 kind, $2 group concurrency or NULL, $3 ordered, $4 onFailure,
 * $5 onDead, $6 and $7 the rate's limit and period or NULL. A kind with no
 * row and nothing declared gets none.
 */
export const pg = `
WITH changed AS (
  INSERT INTO docket_kinds (kind, group_concurrency, group_ordered, group_on_failure, group_on_dead,
    group_rate_limit, group_rate_period_ms, updated_at)
  SELECT $1, $2, $3, $4, $5, $6, $7, ${Now.pg}
  WHERE $2::int IS NOT NULL OR EXISTS (SELECT 1 FROM docket_kinds WHERE kind = $1)
  ON CONFLICT (kind) DO UPDATE SET ${kept("group_concurrency")},
    group_ordered = excluded.group_ordered, group_on_failure = excluded.group_on_failure,
    group_on_dead = excluded.group_on_dead, ${kept("group_rate_limit")},
    ${kept("group_rate_period_ms")}, updated_at = excluded.updated_at
  WHERE (${mine("group_concurrency")}, docket_kinds.group_ordered, docket_kinds.group_on_failure,
         docket_kinds.group_on_dead, ${mine("group_rate_limit")}, ${mine("group_rate_period_ms")})
        IS DISTINCT FROM (excluded.group_concurrency, excluded.group_ordered, excluded.group_on_failure,
         excluded.group_on_dead, excluded.group_rate_limit, excluded.group_rate_period_ms)
  RETURNING kind
)
SELECT kind, pg_notify('${NOTIFY_CHANNEL}', 'kinds') AS woke FROM changed`

/** SQLite: as `pg`; ?3 0 or 1. */
export const sqlite = `
INSERT INTO docket_kinds (kind, group_concurrency, group_ordered, group_on_failure, group_on_dead,
  group_rate_limit, group_rate_period_ms, updated_at)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ${Now.sqlite}
WHERE ?2 IS NOT NULL OR EXISTS (SELECT 1 FROM docket_kinds WHERE kind = ?1)
ON CONFLICT (kind) DO UPDATE SET ${kept("group_concurrency")},
  group_ordered = excluded.group_ordered, group_on_failure = excluded.group_on_failure,
  group_on_dead = excluded.group_on_dead, ${kept("group_rate_limit")},
  ${kept("group_rate_period_ms")}, updated_at = excluded.updated_at
WHERE ${mine("group_concurrency")} IS NOT excluded.group_concurrency
  OR docket_kinds.group_ordered IS NOT excluded.group_ordered
  OR docket_kinds.group_on_failure IS NOT excluded.group_on_failure
  OR docket_kinds.group_on_dead IS NOT excluded.group_on_dead
  OR ${mine("group_rate_limit")} IS NOT excluded.group_rate_limit
  OR ${mine("group_rate_period_ms")} IS NOT excluded.group_rate_period_ms
RETURNING kind`

// The parameters after the kind: none declared is the columns' defaults.
const params = (s: GroupSettingsRow | null, ordered: (b: boolean) => unknown) => [
  s?.concurrency ?? null,
  ordered(s?.ordered ?? false),
  s?.onFailure ?? "wait",
  s?.onDead ?? "release",
  s?.rateLimit ?? null,
  s?.ratePeriodMs ?? null
]

/** `kindSetGroups` for a dialect. */
export const make = op<KindSetGroups>({
  pg: ({ run }) => (kind, s) =>
    Effect.map(run<{ kind: string }>(pg, [kind, ...params(s, (b) => b)]), (rows) => rows.length > 0),
  sqlite: ({ run }) => (kind, s) =>
    Effect.map(run<{ kind: string }>(sqlite, [kind, ...params(s, (b) => (b ? 1 : 0))]), (rows) => rows.length > 0)
})
