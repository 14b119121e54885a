/**
 * SQLite: one grouped kind's claim (a kind with `perGroup` limits, a paused
 * group, or unfinished grouped items: only this claim takes grouped items,
 * migrations/pg/0020_grouped_claim.sql), run by the
 * claim inside its BEGIN IMMEDIATE transaction, so no other claimer in any
 * process can read a group's running count before this one commits. The same
 * steps as PostgreSQL's docket_claim_groups (migrations/pg/0017_groups.sql,
 * which says why): the groups walked round-robin from the kind's cursor (one
 * item per group, then, if the batch is not full, up to each group's free
 * places), an ordered group only from its first
 * unfinished items in enqueue order, stopping at one not due), then the
 * kind's ungrouped items with what is left. A paused group, and a group held
 * by a dead item (onDead "hold"), is passed over; a rate-limited group starts
 * at most what its window has left, and its starts are written; onFailure
 * "continue" leaves an ordered group's failed items waiting for their retry
 * out of its head (migrations/pg/0019_group_controls.sql says why each is
 * stored as it is). As on PostgreSQL since migration 0021
 * (migrations/pg/0021_grouped_claim_set.sql says why), a pass's walk is one
 * statement (`walkGroups`), not statements per group: a recursive CTE seeks
 * the groups one after another from the cursor, and each group's room and
 * picks are subqueries of that row. With no locks to take (the claim holds
 * the write lock), what it picks is leased as it is. A sequence (ordered, one
 * at a time, onFailure "wait") with no per-group rate is walked by
 * `walkSequences`, which finds each group and its head in one seek (as
 * PostgreSQL's 0022 walk takes a sequence's head from the group index,
 * migrations/pg/0022_grouped_claim_chunks.sql) instead of reading the head
 * again through window functions.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { CLAIM_COLUMNS, claimText } from "./columns.js"
import type { ClaimRow } from "./rows.js"

/** Runs one statement (numbered parameters) on the claim's connection. */
export type Exec = <A extends object>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>

/** One grouped kind's claim. */
export interface GroupClaim {
  readonly worker: string
  /** The most items to claim (the kind's allowance in this claim). */
  readonly limit: number
  readonly leaseMs: number
  /** Read each item's stored trace context (`ClaimOptions.traceContext`). */
  readonly traceContext: boolean
  readonly kind: string
  /**
   * The kind's `perGroup.concurrency`, or null for a kind with grouped items
   * and no perGroup limits: its groups are walked round-robin with no limit
   * each (passing over the paused ones).
   */
  readonly concurrency: number | null
  /** The kind's `perGroup.ordered`. */
  readonly ordered: boolean
}

/**
 * The most groups one claim looks at a pass, unless it claims more (then as
 * many as it claims); the cursor moves past them, so the next claim goes on from there.
 */
export const MAX_GROUPS_PER_CLAIM = 1000

// A waiting keyed item is not due while an item of its kind and key holds a live lease.
const twinFree = (alias: string) => `(${alias}.dedupe_key IS NULL OR NOT EXISTS (
  SELECT 1 FROM docket_items t
  WHERE t.state = 'running' AND t.kind = ${alias}.kind AND t.dedupe_key = ${alias}.dedupe_key
    AND t.lease_until > ${Now.sqlite}))`

/** The kind's cursor (the last group the previous claim looked at) and its group settings. ?1 kind. */
export const readSettings = `
SELECT group_cursor, paused_groups, group_on_dead = 'hold' AS hold, group_on_failure = 'continue' AS skip_failed,
  group_rate_limit, group_rate_period_ms
FROM docket_kinds WHERE kind = ?1`

/** The kind's settings as `readSettings` reads them. */
interface Settings {
  readonly group_cursor: string | null
  readonly paused_groups: number
  readonly hold: number
  readonly skip_failed: number
  readonly group_rate_limit: number | null
  readonly group_rate_period_ms: number | null
}

/** The kind's row with no limits, for a kind that has none (its cursor is kept there). ?1 kind. */
export const makeRow = `INSERT OR IGNORE INTO docket_kinds (kind, updated_at) VALUES (?1, ${Now.sqlite})`

/** The group's starts older than ?3 ms forgotten, ?4 new ones written. ?1 kind, ?2 group. */
export const forgetStarts = `
DELETE FROM docket_group_starts WHERE kind = ?1 AND group_key = ?2 AND started_at <= ${Now.sqlite} - ?3`

/** ?3 starts of the group written at the database's now. ?1 kind, ?2 group. */
export const writeStarts = `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?3)
INSERT INTO docket_group_starts (kind, group_key, started_at) SELECT ?1, ?2, ${Now.sqlite} FROM n`

/**
 * One pass's walk over the groups, in one statement: up to ?4 groups after
 * ?2 with unfinished items (up to ?3; NULL: to the end; after the walk wrapped,
 * the group it started after, so each is looked at once), each with the ids
 * it may start now, as a JSON array: none when it is paused (?9 1: the kind
 * has paused groups) or held by a dead item (?10 1: onDead "hold"); else at
 * most ?5 (1 on pass 1: round-robin), ?6 (what the claim has left), its
 * concurrency ?7 (NULL: none) less its live leases, and its rate ?12 (NULL:
 * none) less its starts within ?13 ms. An ordered group (?8 1) starts its
 * first ?7 unfinished items in enqueue order (?11 1: without the failed ones
 * waiting for their retry, onFailure "continue"), passing over the live ones,
 * stopping at the first one not claimable (not due, or its twin running); an
 * unordered group its ended leases and due items in claim order. ?1 kind.
 */
export const walkGroups = `
WITH RECURSIVE walk(n, g) AS (
  SELECT 0, ?2
  UNION ALL
  SELECT w.n + 1, (
    SELECT i.group_key FROM docket_items i
    WHERE i.kind = ?1 AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running') AND i.group_key > w.g
      AND (?3 IS NULL OR i.group_key <= ?3)
    ORDER BY i.group_key LIMIT 1)
  FROM walk w WHERE w.g IS NOT NULL AND w.n < ?4
),
rooms AS (
  SELECT w.n, w.g, CASE
    WHEN ?9 AND EXISTS (SELECT 1 FROM docket_groups q WHERE q.kind = ?1 AND q.group_key = w.g) THEN 0
    WHEN ?10 AND EXISTS (SELECT 1 FROM docket_items d
      WHERE d.kind = ?1 AND d.group_key = w.g AND d.group_key IS NOT NULL AND d.state = 'dead') THEN 0
    ELSE min(?5, ?6,
      CASE WHEN ?7 IS NULL THEN ?6 ELSE ?7 - (SELECT count(*) FROM docket_items r
        WHERE r.kind = ?1 AND r.group_key = w.g AND r.group_key IS NOT NULL AND r.state = 'running'
          AND r.lease_until > ${Now.sqlite}) END,
      CASE WHEN ?12 IS NULL THEN ?6 ELSE ?12 - (SELECT count(*) FROM docket_group_starts s
        WHERE s.kind = ?1 AND s.group_key = w.g AND s.started_at > ${Now.sqlite} - ?13) END)
    END AS room
  FROM walk w WHERE w.n > 0 AND w.g IS NOT NULL
)
SELECT r.n, r.g, CASE
  WHEN r.room <= 0 THEN '[]'
  WHEN ?8 THEN (
    SELECT json_group_array(h.id ORDER BY h.id) FROM (
      SELECT h.id, h.live,
        sum(NOT h.live AND NOT h.ok) OVER (ORDER BY h.id) AS blocked,
        sum(h.ok) OVER (ORDER BY h.id) AS k
      FROM (
        SELECT i.id, (i.state = 'running' AND i.lease_until > ${Now.sqlite}) AS live,
          CASE WHEN i.state = 'running' THEN i.lease_until <= ${Now.sqlite}
               ELSE i.run_at <= ${Now.sqlite} AND ${twinFree("i")} END AS ok
        FROM docket_items i
        WHERE i.kind = ?1 AND i.group_key = r.g AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running')
          AND NOT (?11 AND i.state = 'waiting' AND i.run_at > ${Now.sqlite} AND i.last_error IS NOT NULL)
        ORDER BY i.id LIMIT ?7) h
    ) h
    WHERE NOT h.live AND h.blocked = 0 AND h.k <= r.room)
  ELSE (
    SELECT json_group_array(x.id ORDER BY x.k) FROM (
      SELECT x.id, row_number() OVER (ORDER BY x.priority DESC, x.run_at, x.id) AS k FROM (
        SELECT * FROM (
          SELECT i.id, i.priority, i.run_at FROM docket_items i
          WHERE i.kind = ?1 AND i.group_key = r.g AND i.group_key IS NOT NULL AND i.state = 'running'
            AND i.lease_until <= ${Now.sqlite}
          ORDER BY i.id LIMIT ?5)
        UNION ALL
        SELECT * FROM (
          SELECT i.id, i.priority, i.run_at FROM docket_items i
          WHERE i.kind = ?1 AND i.group_key = r.g AND i.group_key IS NOT NULL AND i.state = 'waiting'
            AND i.run_at <= ${Now.sqlite} AND ${twinFree("i")}
          ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?5)
      ) x
    ) x
    WHERE x.k <= r.room)
  END AS ids
FROM rooms r ORDER BY r.n`

/**
 * One pass's walk over a sequence kind's groups (ordered, concurrency 1,
 * onFailure "wait", no per-group rate), in one statement: up to ?4 groups
 * after ?2 (up to ?3, as `walkGroups`), each found with its head (its first
 * unfinished item: the group index is in group, then id order) by one seek,
 * and the head's id when the group may start it now: not paused (?5 1: the
 * kind has paused groups), not held by a dead item (?6 1: onDead "hold"), no
 * item of it holding a live lease, and the head due (its twin not running) or
 * its lease ended. What `walkGroups` decides for such a group, without its
 * windowed read of the head. ?1 kind.
 */
export const walkSequences = `
WITH RECURSIVE walk(n, g, id, kind, state, run_at, lease_until, dedupe_key) AS (
  SELECT 0, ?2, NULL, NULL, NULL, NULL, NULL, NULL
  UNION ALL
  SELECT w.n + 1, i.group_key, i.id, i.kind, i.state, i.run_at, i.lease_until, i.dedupe_key
  FROM walk w JOIN docket_items i ON i.id = (
    SELECT x.id FROM docket_items x
    WHERE x.kind = ?1 AND x.group_key IS NOT NULL AND x.state IN ('waiting', 'running') AND x.group_key > w.g
      AND (?3 IS NULL OR x.group_key <= ?3)
    ORDER BY x.group_key, x.id LIMIT 1)
  WHERE w.n < ?4
)
SELECT w.n, w.g, CASE
  WHEN ?5 AND EXISTS (SELECT 1 FROM docket_groups q WHERE q.kind = ?1 AND q.group_key = w.g) THEN NULL
  WHEN ?6 AND EXISTS (SELECT 1 FROM docket_items d
    WHERE d.kind = ?1 AND d.group_key = w.g AND d.group_key IS NOT NULL AND d.state = 'dead') THEN NULL
  WHEN EXISTS (SELECT 1 FROM docket_items r
    WHERE r.kind = ?1 AND r.group_key = w.g AND r.group_key IS NOT NULL AND r.state = 'running'
      AND r.lease_until > ${Now.sqlite}) THEN NULL
  WHEN w.state = 'running' THEN CASE WHEN w.lease_until <= ${Now.sqlite} THEN w.id END
  WHEN w.run_at <= ${Now.sqlite} AND ${twinFree("w")} THEN w.id
  END AS id
FROM walk w WHERE w.n > 0 ORDER BY w.n`

/** A group as `walkSequences` returns it: the head's id to lease, or null. */
interface SequenceRow {
  readonly g: string
  readonly id: number | null
}

/** A group as `walkGroups` returns it. */
interface WalkRow {
  readonly g: string
  /** A JSON array of the ids the group may start now. */
  readonly ids: string
}

/** The kind's cursor moved. ?1 kind, ?2 the last group looked at. */
export const writeCursor = `UPDATE docket_kinds SET group_cursor = ?2 WHERE kind = ?1`

/** The chosen items leased. ?1 worker, ?2 a JSON array of ids, ?3 lease in ms. */
export const lease = `
UPDATE docket_items
SET state = 'running', attempts = attempts + 1, lease_seq = lease_seq + 1, claimed_by = ?1,
    lease_until = ${Now.sqlite} + ?3, updated_at = ${Now.sqlite}
WHERE id IN (SELECT value FROM json_each(?2)) AND state IN ('waiting', 'running')
RETURNING ${CLAIM_COLUMNS}`

/** The kind's ungrouped items, in claim order. ?1 worker, ?2 limit, ?3 lease in ms, ?4 kind. */
export const ungrouped = `
UPDATE docket_items
SET state = 'running', attempts = attempts + 1, lease_seq = lease_seq + 1, claimed_by = ?1,
    lease_until = ${Now.sqlite} + ?3, updated_at = ${Now.sqlite}
WHERE id IN (
  SELECT id FROM (
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'running' AND i.lease_until <= ${Now.sqlite} AND i.kind = ?4 AND i.group_key IS NULL
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
    UNION ALL
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'waiting' AND i.run_at <= ${Now.sqlite} AND i.kind = ?4 AND i.group_key IS NULL
        AND ${twinFree("i")}
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
  ) ORDER BY priority DESC, run_at, id LIMIT ?2
)
RETURNING ${CLAIM_COLUMNS}`

// A rate-limited group's starts written (in the claim's transaction, so they
// count exactly when the claim commits), its older ones forgotten.
const recordStarts = (exec: Exec, c: GroupClaim, s: Settings, group: string, n: number) =>
  s.group_rate_limit === null || n === 0 ? Effect.void : Effect.zipRight(
    exec(forgetStarts, [c.kind, group, s.group_rate_period_ms]),
    exec(writeStarts, [c.kind, group, n])
  )

// One pass of the walk from the cursor `start` (wrapping once): each group's
// picks, at most `perGroup` of them (1 on the first pass: round-robin), a
// statement per `chunk` groups (as many as the batch still needs, at least 16).
const pass = (exec: Exec, c: GroupClaim, s: Settings, start: string | null, room: number, perGroup: number) =>
  Effect.gen(function*() {
    const picked: Array<number> = []
    let after = start ?? ""
    let upto: string | null = null
    let wrapped = false
    let last: string | null = null
    const most = Math.max(MAX_GROUPS_PER_CLAIM, c.limit)
    const sequence = c.ordered && c.concurrency === 1 && !s.skip_failed && s.group_rate_limit === null
    for (let steps = 0; picked.length < room && steps < most;) {
      const chunk = Math.min(most - steps, Math.max(room - picked.length, 16))
      const rows: ReadonlyArray<SequenceRow | WalkRow> = sequence
        ? yield* exec<SequenceRow>(walkSequences, [c.kind, after, upto, chunk, s.paused_groups > 0 ? 1 : 0, s.hold])
        : yield* exec<WalkRow>(walkGroups, [
          c.kind, after, upto, chunk, perGroup, room - picked.length, c.concurrency, c.ordered ? 1 : 0,
          s.paused_groups > 0 ? 1 : 0, s.hold, s.skip_failed, s.group_rate_limit, s.group_rate_period_ms
        ])
      for (const row of rows) {
        steps++
        after = last = row.g
        const ids = "ids" in row
          ? (JSON.parse(row.ids) as Array<number>).slice(0, room - picked.length)
          : row.id === null ? [] : [row.id]
        yield* recordStarts(exec, c, s, row.g, ids.length)
        picked.push(...ids)
        if (picked.length >= room) break
      }
      // Fewer groups than asked for: the walk met the last group.
      if (picked.length < room && rows.length < chunk) {
        if (wrapped || start === null) break
        wrapped = true
        after = ""
        upto = start
      }
    }
    return { picked, last }
  })

/** The claim (see the module doc); runs inside the caller's write transaction. */
export const claimGroups = (exec: Exec, c: GroupClaim): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
  Effect.gen(function*() {
    const [found] = yield* exec<Settings>(readSettings, [c.kind])
    const [settings] = found !== undefined ? [found]
      : yield* Effect.zipRight(exec(makeRow, [c.kind]), exec<Settings>(readSettings, [c.kind]))
    if (settings === undefined) return []
    const start = settings.group_cursor
    const claimed: Array<ClaimRow> = []
    // The first pass's items are leased before the second, which counts them.
    const most = c.concurrency ?? c.limit
    for (const perGroup of most > 1 ? [1, most] : [1]) {
      if (claimed.length >= c.limit) break
      const { last, picked } = yield* pass(exec, c, settings, start, c.limit - claimed.length, perGroup)
      if (perGroup === 1 && last !== null) yield* exec(writeCursor, [c.kind, last])
      if (picked.length > 0) claimed.push(...(yield* exec<ClaimRow>(claimText(lease, c.traceContext), [c.worker, JSON.stringify(picked), c.leaseMs])))
    }
    const left = c.limit - claimed.length
    return left <= 0 ? claimed : [...claimed, ...(yield* exec<ClaimRow>(claimText(ungrouped, c.traceContext), [c.worker, left, c.leaseMs, c.kind]))]
  })
