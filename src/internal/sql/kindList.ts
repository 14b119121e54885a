/**
 * Kinds a person controls (migrations/pg/0006_control.sql, docket_kinds):
 * every kind with items or a control row, with its controls (global, and on
 * its groups: perGroup and the count of paused groups, migrations 0017 and
 * 0019, read from the same row) and its counts by state.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { KindInfo, PerGroupInfo } from "../../Domain.js"
import * as Now from "./clock.js"
import { type Run, texts } from "./db.js"
import { num, numOrNull } from "./rows.js"

/** One kind's controls and counts. SQLite's booleans are 0 and 1. */
export interface KindRow {
  readonly kind: string
  readonly paused: boolean | number
  readonly concurrency: number | string | null
  readonly rate_limit: number | string | null
  readonly rate_period_ms: number | string | null
  readonly limits_set_by: string
  readonly group_concurrency: number | string | null
  readonly group_ordered: boolean | number | null
  readonly group_on_failure: string | null
  readonly group_on_dead: string | null
  readonly group_rate_limit: number | string | null
  readonly group_rate_period_ms: number | string | null
  readonly group_limits_set_by: string | null
  readonly paused_groups: number | string | null
  readonly waiting: number | string | null
  readonly scheduled: number | string | null
  readonly running: number | string | null
  readonly expired: number | string | null
  readonly done: number | string | null
  readonly dead: number | string | null
  readonly cancelled: number | string | null
}

const listSql = (now: string, no: string) => `
WITH known AS (
  SELECT kind FROM docket_items_all GROUP BY kind
  UNION SELECT kind FROM docket_kinds
), counts AS (
  SELECT kind,
    sum(CASE WHEN state = 'waiting' AND run_at <= ${now} THEN 1 ELSE 0 END) AS waiting,
    sum(CASE WHEN state = 'waiting' AND run_at > ${now} THEN 1 ELSE 0 END) AS scheduled,
    sum(CASE WHEN state = 'running' AND lease_until > ${now} THEN 1 ELSE 0 END) AS running,
    sum(CASE WHEN state = 'running' AND lease_until <= ${now} THEN 1 ELSE 0 END) AS expired,
    sum(CASE WHEN state = 'done' THEN 1 ELSE 0 END) AS done,
    sum(CASE WHEN state = 'dead' THEN 1 ELSE 0 END) AS dead,
    sum(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled
  FROM docket_items_all GROUP BY kind
)
SELECT n.kind, coalesce(k.paused, ${no}) AS paused, k.concurrency, k.rate_limit, k.rate_period_ms,
  coalesce(k.limits_set_by, 'code') AS limits_set_by,
  k.group_concurrency, k.group_ordered, k.group_on_failure, k.group_on_dead, k.group_rate_limit, k.group_rate_period_ms,
  k.group_limits_set_by, coalesce(k.paused_groups, 0) AS paused_groups,
  coalesce(c.waiting, 0) AS waiting, coalesce(c.scheduled, 0) AS scheduled, coalesce(c.running, 0) AS running,
  coalesce(c.expired, 0) AS expired, coalesce(c.done, 0) AS done, coalesce(c.dead, 0) AS dead, coalesce(c.cancelled, 0) AS cancelled
FROM known n LEFT JOIN docket_kinds k ON k.kind = n.kind LEFT JOIN counts c ON c.kind = n.kind
ORDER BY n.kind`

/** PostgreSQL: every kind with items or a control row (`KindRow`). */
export const pg = listSql(Now.pg, "false")

/** SQLite: as `pg`. */
export const sqlite = listSql(Now.sqlite, "0")

// The kind's perGroup: null when it limits its groups neither at once nor per period (as the claim reads it).
const toPerGroup = (row: KindRow): PerGroupInfo | null => {
  const concurrency = numOrNull(row.group_concurrency)
  const rateLimit = numOrNull(row.group_rate_limit)
  if (concurrency === null && rateLimit === null) return null
  return {
    concurrency,
    ordered: concurrency !== null && (row.group_ordered === true || row.group_ordered === 1),
    onFailure: row.group_on_failure === "continue" ? "continue" : "wait",
    onDead: row.group_on_dead === "hold" ? "hold" : "release",
    rate: rateLimit === null ? null : { limit: rateLimit, periodMs: num(row.group_rate_period_ms) },
    setBy: row.group_limits_set_by === "person" ? "person" : "code"
  }
}

/** A stored kind as users see it. */
export const toKindInfo = (row: KindRow): KindInfo => {
  const rateLimit = numOrNull(row.rate_limit)
  return {
    kind: row.kind,
    paused: row.paused === true || row.paused === 1,
    concurrency: numOrNull(row.concurrency),
    rate: rateLimit === null ? null : { limit: rateLimit, periodMs: num(row.rate_period_ms) },
    limitsSetBy: row.limits_set_by === "person" ? "person" : "code",
    perGroup: toPerGroup(row),
    pausedGroups: num(row.paused_groups),
    counts: {
      waiting: num(row.waiting),
      scheduled: num(row.scheduled),
      running: num(row.running),
      expired: num(row.expired),
      done: num(row.done),
      dead: num(row.dead),
      cancelled: num(row.cancelled)
    }
  }
}

/** The operation: every kind, by kind. */
export type KindList = Effect.Effect<ReadonlyArray<KindInfo>, SqlError>

/** `kindList` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): KindList =>
  Effect.map(run<KindRow>(text, []), (rows) => rows.map(toKindInfo)))
