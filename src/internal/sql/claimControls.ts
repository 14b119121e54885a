/**
 * SQLite: what a claim reads first, the controlled kinds among those claimed
 * (paused, limited, grouped), and what it decides from them: whether the
 * claim needs the write lock (./claimAcquire.ts says how the SQLite claim
 * runs), and which grouped kinds may be prefetched.
 */
import * as Now from "./clock.js"

/**
 * SQLite, first in a claim's transaction: the controlled kinds among those
 * claimed (paused, limited, with perGroup limits, with a paused group, or
 * with unfinished grouped items), each limited one with what it may start now
 * (its concurrency less the items holding a live lease; its rate slots free),
 * read under the transaction's write lock, so no other claim can change them
 * before this one commits. ?1 a JSON array of kinds or NULL for all. The
 * kinds with grouped items are found by a skip scan of docket_items_group (a
 * seek per such kind, one into an empty index when no item has a group); one
 * that has no docket_kinds row is read with a row's defaults (no limits), and
 * the grouped claim makes its row.
 */
export const sqliteControls = `
WITH RECURSIVE grouped(kind) AS (
  SELECT (SELECT i.kind FROM docket_items i
          WHERE i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') ORDER BY i.kind LIMIT 1)
  UNION ALL
  SELECT (SELECT i.kind FROM docket_items i
          WHERE i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') AND i.kind > g.kind
          ORDER BY i.kind LIMIT 1)
  FROM grouped g WHERE g.kind IS NOT NULL
),
k AS (
  SELECT kind, paused, concurrency, rate_limit, rate_period_ms, group_concurrency, group_ordered, paused_groups,
    group_rate_limit
  FROM docket_kinds
  UNION ALL
  SELECT g.kind, 0, NULL, NULL, NULL, NULL, 0, 0, NULL FROM grouped g
  WHERE g.kind IS NOT NULL AND NOT EXISTS (SELECT 1 FROM docket_kinds d WHERE d.kind = g.kind)
)
SELECT k.kind, k.paused, k.rate_limit, k.group_concurrency, k.group_ordered, k.paused_groups, k.group_rate_limit,
  k.kind IN (SELECT kind FROM grouped WHERE kind IS NOT NULL) AS grouped,
  CASE WHEN k.concurrency IS NULL THEN NULL ELSE k.concurrency - (
    SELECT count(*) FROM docket_items r
    WHERE r.state = 'running' AND r.kind = k.kind AND r.lease_until > ${Now.sqlite}) END AS concurrency_left,
  CASE WHEN k.rate_limit IS NULL THEN NULL ELSE (
    SELECT count(*) FROM docket_kind_slots s
    WHERE s.kind = k.kind AND s.started_at <= ${Now.sqlite} - k.rate_period_ms) END AS rate_left
FROM k
WHERE (k.paused OR k.concurrency IS NOT NULL OR k.rate_limit IS NOT NULL OR k.group_concurrency IS NOT NULL
    OR k.paused_groups > 0 OR k.kind IN (SELECT kind FROM grouped WHERE kind IS NOT NULL))
  AND (?1 IS NULL OR k.kind IN (SELECT value FROM json_each(?1)))
ORDER BY k.kind`

/** A controlled kind as `sqliteControls` reads it. */
export interface ControlRow {
  readonly kind: string
  readonly paused: number
  readonly rate_limit: number | null
  /**
   * Its groups' limit (perGroup), or null: then, with no paused group and no
   * grouped item, its items are claimed as a limited kind's.
   */
  readonly group_concurrency: number | null
  readonly group_ordered: number
  /** How many of its groups are paused: with any, its items are claimed group by group, as a grouped kind's. */
  readonly paused_groups: number
  /** 1 when it has unfinished grouped items: they are claimed only group by group (the general claim reads none). */
  readonly grouped: number
  readonly group_rate_limit: number | null
  readonly concurrency_left: number | null
  readonly rate_left: number | null
}

/** Whether the claim takes a controlled kind on its own (under the write lock): any one not paused. */
export const limitedAmong = (controls: ReadonlyArray<ControlRow>) => controls.some((c) => !c.paused)

/**
 * A grouped kind whose items may be prefetched beyond the free slots: no
 * limit on the kind as a whole and no per-group rate
 * (migrations/pg/0020_grouped_claim.sql says why).
 */
export const prefetchable = (c: ControlRow) =>
  c.paused === 0 && c.grouped !== 0 && c.concurrency_left === null && c.rate_limit === null && c.group_rate_limit === null
