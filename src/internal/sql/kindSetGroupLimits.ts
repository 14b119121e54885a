/**
 * A person's setting of a kind's group limits (docket_kinds.group_concurrency,
 * group_rate_limit, group_rate_period_ms, with group_limits_set_by 'person':
 * migrations/pg/0019_group_controls.sql), and its reset. While a person set
 * them, handlers' declarations (./kindSetGroups.ts) leave them as they are
 * and write only the rest (ordered, onFailure, onDead), as a kind's global
 * limits work (./kindSetLimits.ts). A change wakes idle pools on PostgreSQL.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { op } from "./db.js"
import type { LimitsRow } from "./kindSetLimits.js"
import { NOTIFY_CHANNEL } from "./notify.js"

/**
 * The operation: "person" sets the group limits given (a kept one as it is);
 * "reset" clears them and hands them back to the code, only where a person
 * set them. True when something changed.
 */
export type KindSetGroupLimits = (kind: string, limits: LimitsRow, by: "person" | "reset") => Effect.Effect<boolean, SqlError>

/** PostgreSQL: $1 kind, $2 concurrency, $3 rate limit, $4 period (NULLs: none), $5 keep the concurrency, $6 keep the rate. */
export const pgSet = `
WITH changed AS (
  INSERT INTO docket_kinds (kind, group_concurrency, group_rate_limit, group_rate_period_ms, group_limits_set_by, updated_at)
  VALUES ($1, $2, $3, $4, 'person', ${Now.pg})
  ON CONFLICT (kind) DO UPDATE SET
    group_concurrency = CASE WHEN $5 THEN docket_kinds.group_concurrency ELSE excluded.group_concurrency END,
    group_rate_limit = CASE WHEN $6 THEN docket_kinds.group_rate_limit ELSE excluded.group_rate_limit END,
    group_rate_period_ms = CASE WHEN $6 THEN docket_kinds.group_rate_period_ms ELSE excluded.group_rate_period_ms END,
    group_limits_set_by = 'person', updated_at = excluded.updated_at
  RETURNING kind
)
SELECT kind, pg_notify('${NOTIFY_CHANNEL}', 'kinds') AS woke FROM changed`

/** SQLite: as `pgSet`; ?5 and ?6 are 0 or 1. */
export const sqliteSet = `
INSERT INTO docket_kinds (kind, group_concurrency, group_rate_limit, group_rate_period_ms, group_limits_set_by, updated_at)
VALUES (?1, ?2, ?3, ?4, 'person', ${Now.sqlite})
ON CONFLICT (kind) DO UPDATE SET
  group_concurrency = CASE WHEN ?5 THEN docket_kinds.group_concurrency ELSE excluded.group_concurrency END,
  group_rate_limit = CASE WHEN ?6 THEN docket_kinds.group_rate_limit ELSE excluded.group_rate_limit END,
  group_rate_period_ms = CASE WHEN ?6 THEN docket_kinds.group_rate_period_ms ELSE excluded.group_rate_period_ms END,
  group_limits_set_by = 'person', updated_at = excluded.updated_at
RETURNING kind`

/** PostgreSQL reset: $1 kind. */
export const pgReset = `
WITH changed AS (
  UPDATE docket_kinds SET group_concurrency = NULL, group_rate_limit = NULL, group_rate_period_ms = NULL,
    group_limits_set_by = 'code', updated_at = ${Now.pg}
  WHERE kind = $1 AND group_limits_set_by = 'person'
  RETURNING kind
)
SELECT kind, pg_notify('${NOTIFY_CHANNEL}', 'kinds') AS woke FROM changed`

/** SQLite reset: ?1 kind. */
export const sqliteReset = `
UPDATE docket_kinds SET group_concurrency = NULL, group_rate_limit = NULL, group_rate_period_ms = NULL,
  group_limits_set_by = 'code', updated_at = ${Now.sqlite}
WHERE kind = ?1 AND group_limits_set_by = 'person'
RETURNING kind`

/** `kindSetGroupLimits` for a dialect. */
export const make = op<KindSetGroupLimits>({
  pg: ({ run }) => (kind, l, by) =>
    Effect.map(
      by === "reset"
        ? run<{ kind: string }>(pgReset, [kind])
        : run<{ kind: string }>(pgSet, [kind, l.concurrency, l.rateLimit, l.ratePeriodMs, l.keepConcurrency === true, l.keepRate === true]),
      (rows) => rows.length > 0
    ),
  sqlite: ({ run }) => (kind, l, by) =>
    Effect.map(
      by === "reset"
        ? run<{ kind: string }>(sqliteReset, [kind])
        : run<{ kind: string }>(sqliteSet, [
          kind, l.concurrency, l.rateLimit, l.ratePeriodMs, l.keepConcurrency === true ? 1 : 0, l.keepRate === true ? 1 : 0
        ]),
      (rows) => rows.length > 0
    )
})
