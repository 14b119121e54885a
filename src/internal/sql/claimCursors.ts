/**
 * The claim's cursors on PostgreSQL (migrations/pg/0015_claim_cursor.sql says
 * why): per priority, the position (run_at, id) of the last item this
 * worker's walk claimed there, and the time up to which it has claimed every
 * ended lease it could see. A claim with cursors seeks past the dead index
 * entries that a snapshot held by another session keeps at the head of the
 * queue, and reads only the leases that ended since.
 *
 * Every claim is a full walk (every priority from its head, every ended
 * lease: the claim as it was before 0015) until one reads more than
 * WASTED_ENTRIES index entries beyond the items it claimed: then vacuum is
 * held back (or other kinds' items lie in the way), and the claims go on from
 * the cursors. A full walk runs again at least every FULL_EVERY_MIN_MS, or 20
 * times as long as the last one took when that is longer (at most
 * FULL_EVERY_MAX_MS), and decides again: a full walk that reads a million dead
 * entries costs a worker no more than a twentieth of its claiming, and
 * whatever landed behind a cursor waits for it no longer than that.
 *
 * Cursors are kept per set of kinds claimed (a walk that left some kinds out
 * passed their items by, so its cursors must not serve a walk that takes
 * them). After a full walk, each priority it claimed from takes the position
 * of the last item claimed there, also when that is behind its cursor (items
 * had landed behind it: the next claims go on from them, in order). After a
 * cursor walk, a cursor only moves on.
 */
import * as Metric from "effect/Metric"
import { num } from "./rows.js"

/** The longest a worker claims with cursors before a full walk (while full walks are cheap). */
export const FULL_EVERY_MIN_MS = 1000
/** The longest a worker claims with cursors before a full walk, however slow full walks are. */
export const FULL_EVERY_MAX_MS = 10_000
/** Index entries a full walk may read beyond the items it claims before the claims go on from cursors (about a millisecond of the server's time). */
export const WASTED_ENTRIES = 5000
/** A full walk at most every this many times its own duration. */
const FULL_COST_SHARE = 20
/** Cursors kept per set of kinds; more priorities are walked from their head. */
const MAX_PRIORITIES = 64
/** Sets of kinds kept (the least recently used one goes first). */
const MAX_SETS = 16

/**
 * Claims on PostgreSQL by walk ("full" or "cursor"), and the index entries
 * they read (the claim and lease indexes): a full walk that reads far more
 * entries than it claims is the mark of dead entries vacuum may not remove.
 */
export const claimMetrics = {
  claims: Metric.counter("docket_claims", { description: "PostgreSQL claims sent, by walk (full, or from the cursors)" }),
  entries: Metric.counter("docket_claim_index_entries", {
    description: "Index entries the PostgreSQL claims read (claim and lease indexes), by walk"
  })
}

/** The claims metric and the entries metric of one walk. */
export const walkMetrics = (walk: "full" | "cursor") => ({
  claims: Metric.tagged(claimMetrics.claims, "walk", walk),
  entries: Metric.tagged(claimMetrics.entries, "walk", walk)
})
const FULL_METRICS = walkMetrics("full")
const CURSOR_METRICS = walkMetrics("cursor")

/** A claim's walk as the claim function takes it: the cursors (null for a full walk) and the expired leases' bound. */
export interface Walk {
  readonly priorities: ReadonlyArray<number> | null
  readonly runAts: ReadonlyArray<number> | null
  readonly ids: ReadonlyArray<number> | null
  /** Only leases that ended after this (database ms) are read; null: all. */
  readonly expiredAfter: number | null
}

/** What the cursors need of a row the claim returned: an item, or (id null) the next bound. */
export interface WalkedRow {
  readonly priority: number | string | null
  readonly run_at: number | string | null
  readonly id: number | string | null
  readonly walked: boolean | null
  readonly expired_until: number | string | null
  /** On the row without an item: the index entries the claim read. */
  readonly entries_read: number | string | null
}

const FULL: Walk = { priorities: null, runAts: null, ids: null, expiredAfter: null }

interface Position {
  readonly runAt: number
  readonly id: number
}

const before = (a: Position, b: Position) => a.runAt < b.runAt || (a.runAt === b.runAt && a.id < b.id)

class KindsCursors {
  readonly positions = new Map<number, Position>()
  /** Claims go on from the cursors (the last full walk read many entries it did not claim). */
  onCursors = false
  nextFullAt = 0
  expiredAfter: number | null = null
}

/** One worker's cursors (one claim connection's claims). */
export class Cursors {
  private readonly sets = new Map<string, KindsCursors>()

  /** Time source (performance.now by default; tests give their own). */
  constructor(private readonly clock: () => number = () => performance.now()) {}

  /**
   * True while some set of kinds is claimed from cursors: a snapshot is
   * holding vacuum back (itemNextDue then leaves out the leases' ends, whose
   * index holds a dead entry for every item finished meanwhile).
   */
  onCursors(): boolean {
    for (const set of this.sets.values()) if (set.onCursors) return true
    return false
  }

  /** The clock's time (a claim's start, for `record`). */
  now(): number {
    return this.clock()
  }

  /**
   * The walk for a claim of `kinds`: a full walk unless the last one read
   * more than WASTED_ENTRIES beyond its items, and until the next is due.
   */
  plan(kinds: ReadonlyArray<string> | null): Walk {
    const set = this.sets.get(keyOf(kinds))
    if (set === undefined) return FULL
    if (!set.onCursors || set.positions.size === 0 || this.clock() >= set.nextFullAt) return FULL
    const priorities: Array<number> = []
    const runAts: Array<number> = []
    const ids: Array<number> = []
    for (const [priority, position] of set.positions) {
      priorities.push(priority)
      runAts.push(position.runAt)
      ids.push(position.id)
    }
    return { priorities, runAts, ids, expiredAfter: set.expiredAfter }
  }

  /**
   * Moves the cursors of `kinds` by a claim's rows (`startedAt` is the
   * clock's time when the claim was sent); returns the metrics to count.
   */
  record(
    kinds: ReadonlyArray<string> | null,
    walk: Walk,
    startedAt: number,
    rows: ReadonlyArray<WalkedRow>
  ): { readonly metrics: ReturnType<typeof walkMetrics>; readonly entriesRead: number } {
    const key = keyOf(kinds)
    const set = this.sets.get(key) ?? new KindsCursors()
    this.sets.delete(key)
    this.sets.set(key, set) // most recently used last
    if (this.sets.size > MAX_SETS) this.sets.delete(this.sets.keys().next().value as string)
    const now = this.clock()
    const full = walk.priorities === null
    const last = new Map<number, Position>()
    let entriesRead = 0
    for (const row of rows) {
      if (row.id === null) {
        entriesRead = num(row.entries_read)
        // NULL: a full walk that ended leases filled; the bound stays.
        if (row.expired_until !== null) set.expiredAfter = num(row.expired_until)
        if (full) {
          set.onCursors = num(row.entries_read) - (rows.length - 1) > WASTED_ENTRIES
          set.nextFullAt = now + Math.min(FULL_EVERY_MAX_MS, Math.max(FULL_EVERY_MIN_MS, (now - startedAt) * FULL_COST_SHARE))
        }
        continue
      }
      if (row.walked !== true) continue
      const priority = num(row.priority)
      const position = { runAt: num(row.run_at), id: num(row.id) }
      const seen = last.get(priority)
      if (seen === undefined || before(seen, position)) last.set(priority, position)
    }
    for (const [priority, position] of last) {
      const old = set.positions.get(priority)
      if (old === undefined && set.positions.size >= MAX_PRIORITIES) continue
      if (full || old === undefined || before(old, position)) set.positions.set(priority, position)
    }
    return { metrics: full ? FULL_METRICS : CURSOR_METRICS, entriesRead }
  }
}

const keyOf = (kinds: ReadonlyArray<string> | null): string => kinds === null ? "*" : JSON.stringify(kinds)
