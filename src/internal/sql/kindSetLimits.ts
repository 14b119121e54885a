/**
 * Setting a kind's limits (docket_kinds, migrations/pg/0006_control.sql), the
 * same steps on both dialects: the row written (a person's, a handler's
 * declaration, or a reset), then, if it changed, the kind's rate slots
 * brought to its limit, all in one transaction. The first statement writes,
 * so on SQLite the transaction holds the write lock from it.
 *
 * Every change that may let more items start (a limit raised or removed)
 * notifies the PostgreSQL channel idle pools listen on, so they claim at
 * once; the notification is sent at the change's commit.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { type Db, op } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"

/** A kind's limits as stored (NULL for none; the rate's two together). */
export interface LimitsRow {
  readonly concurrency: number | null
  readonly rateLimit: number | null
  readonly ratePeriodMs: number | null
  /** A person's setting only: leave the concurrency, or the rate, as stored. */
  readonly keepConcurrency?: boolean | undefined
  readonly keepRate?: boolean | undefined
}

/**
 * The operation: sets a kind's limits and its rate slots, in one transaction:
 * "person" a person's; "code" a handler's declaration (nothing changes where
 * a person set them); "reset" none, handed back to the code. True when it changed.
 */
export type KindSetLimits = (kind: string, limits: LimitsRow, by: "person" | "code" | "reset") => Effect.Effect<boolean, SqlError>

const wake = `pg_notify('${NOTIFY_CHANNEL}', 'kinds')`

/**
 * PostgreSQL: a person's limits. $1 kind, $2 concurrency or NULL, $3 rate
 * limit or NULL, $4 its period in ms or NULL; $5 keep the concurrency as it
 * is, $6 keep the rate as it is (a new row takes NULL for a kept one). Wakes
 * idle pools (a limit raised or removed lets items start).
 */
export const pgSetLimits = `
WITH changed AS (
  INSERT INTO docket_kinds (kind, concurrency, rate_limit, rate_period_ms, limits_set_by, updated_at)
  VALUES ($1, $2, $3, $4, 'person', ${Now.pg})
  ON CONFLICT (kind) DO UPDATE SET
    concurrency = CASE WHEN $5 THEN docket_kinds.concurrency ELSE excluded.concurrency END,
    rate_limit = CASE WHEN $6 THEN docket_kinds.rate_limit ELSE excluded.rate_limit END,
    rate_period_ms = CASE WHEN $6 THEN docket_kinds.rate_period_ms ELSE excluded.rate_period_ms END,
    limits_set_by = 'person', updated_at = excluded.updated_at
  RETURNING kind
)
SELECT kind, ${wake} AS woke FROM changed`

/** SQLite: as `pgSetLimits`; ?5 and ?6 are 0 or 1. */
export const sqliteSetLimits = `
INSERT INTO docket_kinds (kind, concurrency, rate_limit, rate_period_ms, limits_set_by, updated_at)
VALUES (?1, ?2, ?3, ?4, 'person', ${Now.sqlite})
ON CONFLICT (kind) DO UPDATE SET
  concurrency = CASE WHEN ?5 THEN docket_kinds.concurrency ELSE excluded.concurrency END,
  rate_limit = CASE WHEN ?6 THEN docket_kinds.rate_limit ELSE excluded.rate_limit END,
  rate_period_ms = CASE WHEN ?6 THEN docket_kinds.rate_period_ms ELSE excluded.rate_period_ms END,
  limits_set_by = 'person', updated_at = excluded.updated_at
RETURNING kind`

/**
 * PostgreSQL: a handler's declared limits, written unless a person set the
 * kind's limits (limits_set_by = 'person': then nothing changes and no row
 * returns). $1 kind, $2 concurrency, $3 rate limit, $4 period (NULLs for
 * none). A kind with no row and nothing declared gets no row.
 */
export const pgDeclare = `
WITH changed AS (
  INSERT INTO docket_kinds (kind, concurrency, rate_limit, rate_period_ms, limits_set_by, updated_at)
  SELECT $1, $2, $3, $4, 'code', ${Now.pg}
  WHERE $2::int IS NOT NULL OR $3::int IS NOT NULL OR EXISTS (SELECT 1 FROM docket_kinds WHERE kind = $1)
  ON CONFLICT (kind) DO UPDATE SET concurrency = excluded.concurrency, rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms, updated_at = excluded.updated_at
  WHERE docket_kinds.limits_set_by = 'code'
    AND (docket_kinds.concurrency, docket_kinds.rate_limit, docket_kinds.rate_period_ms)
        IS DISTINCT FROM (excluded.concurrency, excluded.rate_limit, excluded.rate_period_ms)
  RETURNING kind
)
SELECT kind, ${wake} AS woke FROM changed`

/** SQLite: as `pgDeclare`; ?1 kind, ?2 concurrency, ?3 rate limit, ?4 period. */
export const sqliteDeclare = `
INSERT INTO docket_kinds (kind, concurrency, rate_limit, rate_period_ms, limits_set_by, updated_at)
SELECT ?1, ?2, ?3, ?4, 'code', ${Now.sqlite}
WHERE ?2 IS NOT NULL OR ?3 IS NOT NULL OR EXISTS (SELECT 1 FROM docket_kinds WHERE kind = ?1)
ON CONFLICT (kind) DO UPDATE SET concurrency = excluded.concurrency, rate_limit = excluded.rate_limit,
  rate_period_ms = excluded.rate_period_ms, updated_at = excluded.updated_at
WHERE docket_kinds.limits_set_by = 'code'
  AND (docket_kinds.concurrency IS NOT excluded.concurrency OR docket_kinds.rate_limit IS NOT excluded.rate_limit
       OR docket_kinds.rate_period_ms IS NOT excluded.rate_period_ms)
RETURNING kind`

/**
 * PostgreSQL: hands a kind's limits back to its code: no limits until a
 * worker whose handler declares some starts. $1 kind. Wakes idle pools.
 */
export const pgReset = `
WITH changed AS (
  UPDATE docket_kinds SET concurrency = NULL, rate_limit = NULL, rate_period_ms = NULL, limits_set_by = 'code',
    updated_at = ${Now.pg}
  WHERE kind = $1
  RETURNING kind
)
SELECT kind, ${wake} AS woke FROM changed`

/** SQLite: as `pgReset`; ?1 kind. */
export const sqliteReset = `
UPDATE docket_kinds SET concurrency = NULL, rate_limit = NULL, rate_period_ms = NULL, limits_set_by = 'code',
  updated_at = ${Now.sqlite}
WHERE kind = ?1
RETURNING kind`

// A rate-limited kind keeps exactly rate_limit slots: after a change, the
// slots beyond the newest rate_limit go (the newest starts are the ones the
// new limit must still count), and missing ones are added as never used.
const dropSlots = (p: string) => `
DELETE FROM docket_kind_slots WHERE kind = ${p} AND slot NOT IN (
  SELECT s.slot FROM docket_kind_slots s WHERE s.kind = ${p}
  ORDER BY s.started_at DESC, s.slot DESC
  LIMIT coalesce((SELECT k.rate_limit FROM docket_kinds k WHERE k.kind = ${p}), 0))`

const addSlots = (p: string) => `
INSERT INTO docket_kind_slots (kind, slot, started_at)
WITH RECURSIVE have AS (
  SELECT coalesce(max(slot) + 1, 0) AS base, count(*) AS n FROM docket_kind_slots WHERE kind = ${p}
), wanted AS (
  SELECT coalesce((SELECT k.rate_limit FROM docket_kinds k WHERE k.kind = ${p}), 0) AS n
), series(i) AS (
  SELECT 0 WHERE (SELECT n FROM wanted) > (SELECT n FROM have)
  UNION ALL SELECT i + 1 FROM series WHERE i + 1 < (SELECT n FROM wanted) - (SELECT n FROM have)
)
SELECT ${p}, (SELECT base FROM have) + i, 0 FROM series`

/** PostgreSQL: the kind's slots to its rate limit, first the extra ones dropped, then the missing added. $1 kind. */
export const pgDropSlots = dropSlots("$1")
/** PostgreSQL: see `pgDropSlots`. */
export const pgAddSlots = addSlots("$1::text")
/** SQLite: as `pgDropSlots`; ?1 kind. */
export const sqliteDropSlots = dropSlots("?1")
/** SQLite: as `pgAddSlots`; ?1 kind. */
export const sqliteAddSlots = addSlots("?1")

/** One dialect's statements and its boolean encoding. */
interface Texts {
  readonly reset: string
  readonly setByPerson: string
  readonly declare: string
  readonly dropSlots: string
  readonly addSlots: string
  readonly flag: (b: boolean) => unknown
}

const setter = (texts: Texts) => ({ run, transaction }: Db): KindSetLimits => (kind, limits, by) =>
  transaction(Effect.gen(function*() {
    const params = [kind, limits.concurrency, limits.rateLimit, limits.ratePeriodMs]
    const changed = yield* (by === "reset"
      ? run<{ kind: string }>(texts.reset, [kind])
      : by === "person"
      ? run<{ kind: string }>(texts.setByPerson, [
        ...params,
        texts.flag(limits.keepConcurrency === true),
        texts.flag(limits.keepRate === true)
      ])
      : run<{ kind: string }>(texts.declare, params))
    if (changed.length === 0) return false
    yield* run(texts.dropSlots, [kind])
    yield* run(texts.addSlots, [kind])
    return true
  }))

/** `kindSetLimits` for a dialect. */
export const make = op<KindSetLimits>({
  pg: setter({
    reset: pgReset, setByPerson: pgSetLimits, declare: pgDeclare, dropSlots: pgDropSlots, addSlots: pgAddSlots,
    flag: (b) => b
  }),
  sqlite: setter({
    reset: sqliteReset, setByPerson: sqliteSetLimits, declare: sqliteDeclare, dropSlots: sqliteDropSlots,
    addSlots: sqliteAddSlots, flag: (b) => (b ? 1 : 0)
  })
})
