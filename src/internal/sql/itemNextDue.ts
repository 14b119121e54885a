/**
 * Next due: milliseconds from the database's now until a waiting item not yet
 * due becomes due, a lease ends (negative if one has ended), or a
 * rate-limited kind's next start slot frees, in `wait_ms`.
 *
 * The next waiting item not yet due is found through docket_items_scheduled
 * (migrations/pg/0004_scheduled_index.sql, migrations/sqlite/0004_scheduled_index.sql):
 * such an item has run_at > now >= created_at, so the index's predicate holds
 * for it; items already due are the claim's, not the wait's.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Now from "./clock.js"
import { op, type Run } from "./db.js"
import { num } from "./rows.js"

// The next time a used start slot of a rate-limited kind frees (only slots
// used within the last period: a kind at rest wakes nobody), or a start of a
// group with a per-group rate leaves its window (migration 0019: the table
// holds only rate-limited groups' recent starts, so it is small). A pool whose
// claim was held back by a rate sleeps until then, not for a whole poll.
const slotFrees = (now: string) => `(
    SELECT min(f.at) FROM (
      SELECT min(s.started_at + k.rate_period_ms) AS at FROM docket_kind_slots s JOIN docket_kinds k ON k.kind = s.kind
      WHERE k.rate_limit IS NOT NULL AND s.started_at + k.rate_period_ms > ${now}
      UNION ALL
      SELECT min(s.started_at + k.group_rate_period_ms) FROM docket_group_starts s JOIN docket_kinds k ON k.kind = s.kind
      WHERE k.group_rate_limit IS NOT NULL AND s.started_at + k.group_rate_period_ms > ${now}) f)`

// PostgreSQL's text, with or without the leases' ends.
const pgText = (leases: boolean) => `
SELECT least(
  (SELECT min(run_at) FROM docket_items
   WHERE state = 'waiting' AND run_at > created_at AND run_at > ${Now.pg}),
  ${leases ? "(SELECT min(lease_until) FROM docket_items WHERE state = 'running')," : ""}
  ${slotFrees(Now.pg)}
) - ${Now.pg} AS wait_ms`

/** PostgreSQL: NULL when there is neither. */
export const pg = pgText(true)

/**
 * PostgreSQL while claims go on from cursors (./claimCursors.ts: a snapshot
 * holds vacuum back): without the leases' ends. Their index then holds a dead
 * entry for every item finished since the snapshot, all before the first live
 * lease, and reading them cost more than the wait saves: a pool still claims
 * an ended lease at its next poll (a lease plus a poll, as docs/concepts.md
 * promises), and its claims take ended leases whenever they run.
 */
export const pgWithoutLeases = pgText(false)

/**
 * SQLite: its min(a, b) is NULL when either is (PostgreSQL's least skips
 * NULLs), so each side is capped instead: about 9e15 when there is neither.
 */
export const sqlite = `
SELECT min(
  coalesce((SELECT min(run_at) FROM docket_items
            WHERE state = 'waiting' AND run_at > created_at AND run_at > ${Now.sqlite}), 9007199254740991),
  coalesce((SELECT min(lease_until) FROM docket_items WHERE state = 'running'), 9007199254740991),
  coalesce(${slotFrees(Now.sqlite)}, 9007199254740991)
) - ${Now.sqlite} AS wait_ms`

/** The operation: the wait, none when nothing is scheduled or leased, never negative. */
export type ItemNextDue = Effect.Effect<Option.Option<Duration.Duration>, SqlError>

// Above 1e14 ms is SQLite's cap for neither (about 9e15): none.
const toWait = (rows: ReadonlyArray<{ readonly wait_ms: number | string | null }>): Option.Option<Duration.Duration> => {
  const wait = rows[0]?.wait_ms
  if (wait === null || wait === undefined) return Option.none()
  const ms = num(wait)
  return ms > 1e14 ? Option.none() : Option.some(Duration.millis(Math.max(0, ms)))
}

const read = (run: Run, text: string): ItemNextDue => Effect.map(run<{ wait_ms: number | string | null }>(text, []), toWait)

/** `itemNextDue` for a dialect. */
export const make = op<ItemNextDue>({
  pg: ({ cursors, run }) => Effect.suspend(() => read(run, cursors?.onCursors() === true ? pgWithoutLeases : pg)),
  sqlite: ({ run }) => read(run, sqlite)
})
