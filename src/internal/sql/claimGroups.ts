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
 * stored as it is). SQLite runs in the process, so the walk is a loop of
 * small statements here rather than a function.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { CLAIM_COLUMNS } from "./columns.js"
import type { ClaimRow } from "./rows.js"

/** Runs one statement (numbered parameters) on the claim's connection. */
export type Exec = <A extends object>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>

/** One grouped kind's claim. */
export interface GroupClaim {
  readonly worker: string
  /** The most items to claim (the kind's allowance in this claim). */
  readonly limit: number
  readonly leaseMs: number
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

/** The most groups one claim looks at; the cursor moves past them, so the next claim goes on from there. */
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

/** 1 when the group is paused. ?1 kind, ?2 group. */
export const paused = `SELECT 1 AS paused FROM docket_groups WHERE kind = ?1 AND group_key = ?2`

/** 1 when the group has a dead item (onDead "hold"). ?1 kind, ?2 group. */
export const held = `
SELECT 1 AS held FROM docket_items
WHERE kind = ?1 AND group_key = ?2 AND group_key IS NOT NULL AND state = 'dead' LIMIT 1`

/** The group's starts within the last ?3 ms. ?1 kind, ?2 group. */
export const startedCount = `
SELECT count(*) AS n FROM docket_group_starts
WHERE kind = ?1 AND group_key = ?2 AND started_at > ${Now.sqlite} - ?3`

/** The group's starts older than ?3 ms forgotten, ?4 new ones written. ?1 kind, ?2 group. */
export const forgetStarts = `
DELETE FROM docket_group_starts WHERE kind = ?1 AND group_key = ?2 AND started_at <= ${Now.sqlite} - ?3`

/** ?3 starts of the group written at the database's now. ?1 kind, ?2 group. */
export const writeStarts = `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?3)
INSERT INTO docket_group_starts (kind, group_key, started_at) SELECT ?1, ?2, ${Now.sqlite} FROM n`

/**
 * The first group after ?2 with unfinished items, up to ?3 (NULL: to the
 * end; after the walk wrapped, the group it started after, so each is looked
 * at once). ?1 kind.
 */
export const nextGroup = `
SELECT group_key FROM docket_items
WHERE kind = ?1 AND group_key IS NOT NULL AND state IN ('waiting', 'running') AND group_key > ?2
  AND (?3 IS NULL OR group_key <= ?3)
ORDER BY group_key LIMIT 1`

/** The group's items holding a live lease. ?1 kind, ?2 group. */
export const liveCount = `
SELECT count(*) AS n FROM docket_items
WHERE kind = ?1 AND group_key = ?2 AND group_key IS NOT NULL AND state = 'running' AND lease_until > ${Now.sqlite}`

/**
 * An ordered group's first ?3 unfinished items in enqueue order, each with
 * whether it is live (running, lease not ended) and claimable (due and not
 * held back by a running twin, or its lease ended). ?1 kind, ?2 group, ?4 1
 * to leave out the items waiting for a retry after a failure (onFailure
 * "continue"), 0 to keep them (the group waits for them).
 */
export const orderedHead = `
SELECT i.id,
  (i.state = 'running' AND i.lease_until > ${Now.sqlite}) AS live,
  CASE WHEN i.state = 'running' THEN i.lease_until <= ${Now.sqlite}
       ELSE i.run_at <= ${Now.sqlite} AND ${twinFree("i")} END AS claimable
FROM docket_items i
WHERE i.kind = ?1 AND i.group_key = ?2 AND i.group_key IS NOT NULL AND i.state IN ('waiting', 'running')
  AND NOT (?4 AND i.state = 'waiting' AND i.run_at > ${Now.sqlite} AND i.last_error IS NOT NULL)
ORDER BY i.id LIMIT ?3`

/** An unordered group's first ?3 claimable items in claim order. ?1 kind, ?2 group. */
export const unorderedDue = `
SELECT id FROM (
  SELECT * FROM (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.kind = ?1 AND i.group_key = ?2 AND i.group_key IS NOT NULL AND i.state = 'running'
      AND i.lease_until <= ${Now.sqlite}
    ORDER BY i.id LIMIT ?3)
  UNION ALL
  SELECT * FROM (
    SELECT i.id, i.priority, i.run_at FROM docket_items i
    WHERE i.kind = ?1 AND i.group_key = ?2 AND i.group_key IS NOT NULL AND i.state = 'waiting'
      AND i.run_at <= ${Now.sqlite} AND ${twinFree("i")}
    ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?3)
) ORDER BY priority DESC, run_at, id LIMIT ?3`

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

// The ids a group may start now: up to `room`, in enqueue order for an
// ordered group (skipping its live ones, stopping at the first not claimable).
const groupPicks = (exec: Exec, c: GroupClaim, s: Settings, group: string, room: number) =>
  c.ordered
    ? Effect.map(exec<{ id: number; live: number; claimable: number }>(orderedHead, [c.kind, group, c.concurrency ?? -1, s.skip_failed]), (rows) => {
      const ids: Array<number> = []
      for (const row of rows) {
        if (row.live) continue
        if (!row.claimable || ids.length >= room) break
        ids.push(row.id)
      }
      return ids
    })
    : Effect.map(exec<{ id: number }>(unorderedDue, [c.kind, group, room]), (rows) => rows.map((row) => row.id))

// How many items the group may start now, at most `most`: 0 when it is paused
// or held by a dead item; else its free places and what its rate's window has left.
const groupRoom = (exec: Exec, c: GroupClaim, s: Settings, group: string, most: number) =>
  Effect.gen(function*() {
    if (s.paused_groups > 0 && (yield* exec(paused, [c.kind, group])).length > 0) return 0
    if (s.hold && (yield* exec(held, [c.kind, group])).length > 0) return 0
    let room = most
    if (c.concurrency !== null) {
      const [{ n }] = yield* exec<{ n: number }>(liveCount, [c.kind, group])
      room = Math.min(room, c.concurrency - n)
    }
    if (s.group_rate_limit !== null && room > 0) {
      const [{ n }] = yield* exec<{ n: number }>(startedCount, [c.kind, group, s.group_rate_period_ms])
      room = Math.min(room, s.group_rate_limit - n)
    }
    return room
  })

// A rate-limited group's starts written (in the claim's transaction, so they
// count exactly when the claim commits), its older ones forgotten.
const recordStarts = (exec: Exec, c: GroupClaim, s: Settings, group: string, n: number) =>
  s.group_rate_limit === null || n === 0 ? Effect.void : Effect.zipRight(
    exec(forgetStarts, [c.kind, group, s.group_rate_period_ms]),
    exec(writeStarts, [c.kind, group, n])
  )

// One pass of the walk from the cursor `start` (wrapping once): each group's
// picks, at most `perGroup` of them (1 on the first pass: round-robin).
const pass = (exec: Exec, c: GroupClaim, s: Settings, start: string | null, room: number, perGroup: number) =>
  Effect.gen(function*() {
    const picked: Array<number> = []
    let after = start ?? ""
    let wrapped = false
    let last: string | null = null
    for (let steps = 0; picked.length < room && steps < MAX_GROUPS_PER_CLAIM;) {
      const [next] = yield* exec<{ group_key: string }>(nextGroup, [c.kind, after, wrapped ? start : null])
      if (next === undefined) {
        if (wrapped || start === null) break
        wrapped = true
        after = ""
        continue
      }
      after = last = next.group_key
      steps++
      const free = yield* groupRoom(exec, c, s, after, Math.min(room - picked.length, perGroup))
      if (free <= 0) continue
      const ids = yield* groupPicks(exec, c, s, after, free)
      yield* recordStarts(exec, c, s, after, ids.length)
      picked.push(...ids)
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
      if (picked.length > 0) claimed.push(...(yield* exec<ClaimRow>(lease, [c.worker, JSON.stringify(picked), c.leaseMs])))
    }
    const left = c.limit - claimed.length
    return left <= 0 ? claimed : [...claimed, ...(yield* exec<ClaimRow>(ungrouped, [c.worker, left, c.leaseMs, c.kind]))]
  })
