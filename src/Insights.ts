/**
 * The read model's types: how long the oldest due item of each kind has
 * waited, what finished and what was retried per minute and in all, and a
 * search over the items (QueueRepo's `oldestDue`, `finishedPerMinute`,
 * `retriedPerMinute`, `totals`, `searchItems`), and who holds back the
 * xmin horizon of a PostgreSQL database (`horizon`): what the dashboard and
 * /metrics read. Re-exported by
 * Domain.ts, beside the queue's other types.
 */
import type * as Duration from "effect/Duration"
import type { FinishedState, Item, ListState } from "./Item.js"

/** A kind's due items (waiting and due, or running with an ended lease) and how long the oldest has been due. */
export interface OldestDue {
  readonly kind: string
  /** Milliseconds from the oldest due item's due time (its run-after, or its lease's end) to the database's now. */
  readonly ageMs: number
  /** How many of its items are due. */
  readonly due: number
}

/**
 * A kind whose groups the claim limits (a `perGroup` concurrency, or a paused
 * group): its due items that their group holds back, and how long its
 * oldest due item that its group lets start has waited, across its groups.
 */
export interface GroupsDue {
  readonly kind: string
  /**
   * Due waiting items of its groups that their group holds back: a paused
   * group, a dead item holding it (onDead "hold"), its rate spent, an ordered
   * group's item behind its head, an unordered group's past its free places.
   */
  readonly blocked: number
  /**
   * Milliseconds from the due time of its oldest due item that its group
   * lets start to the database's now (what a free worker would take first:
   * the kind's latency across its groups, without the items that wait for
   * their group by design); null when none is.
   */
  readonly oldestReadyAgeMs: number | null
}

/** How many items of a kind finished in a state during one minute (epoch ms of its start, database clock). */
export interface FinishedMinute {
  readonly minute: number
  readonly kind: string
  readonly state: FinishedState
  readonly count: number
}

/**
 * How many failed attempts of a kind went back to waiting to be retried
 * during one minute (epoch ms of its start, database clock): a snooze, a
 * failure to dead and a cancel are not retries.
 */
export interface RetriedMinute {
  readonly minute: number
  readonly kind: string
  readonly count: number
}

/**
 * Every item of a kind that ever finished in a state (`done`, `dead`,
 * `cancelled`), or every attempt of it retried (`retried`): the kept history
 * plus what left it (pruned, retried or deleted dead items, retry counts
 * older than a day: migration 0012), so it never falls. Items a retention of
 * 0 deleted at their complete are not counted (nothing was kept).
 */
export interface Total {
  readonly kind: string
  readonly what: FinishedState | "retried"
  readonly count: number
}

/** Options of `searchItems`: `list`'s filters, and a key and a text. */
export interface SearchOptions {
  readonly state?: ListState | undefined
  readonly kind?: string | undefined
  /** Items with exactly this dedupe key. */
  readonly key?: string | undefined
  /** Items whose payload or last error holds this text (case-insensitive for ASCII letters), 1 to 200 characters. */
  readonly text?: string | undefined
  /** Items per page, from 1 to 1,000 (default 50). */
  readonly limit?: number | undefined
  /** The `cursor` of the previous page, with the same filters. */
  readonly cursor?: string | undefined
}

/**
 * One page of `searchItems`, newest first by id. A page reads at most
 * `scanCap` rows (below its cursor): it may hold fewer items than asked and
 * still have a `cursor` (the search goes on below the rows it read).
 */
export interface SearchPage {
  readonly items: ReadonlyArray<Item>
  readonly cursor: string | null
  /** The most rows one page reads. */
  readonly scanCap: number
}

/**
 * When a holder of the xmin horizon is reported (QueueRepo's `horizon`):
 * past `age` where PostgreSQL records a time (a session's open transaction,
 * a prepared transaction), past `transactions` where it records none (a
 * replication slot, a standby's feedback through a walsender without one).
 * docs/operations.md, "The xmin horizon held back", says why these defaults.
 */
export interface HorizonThreshold {
  /** A transaction open (or prepared) longer than this holds the horizon back (default 5 minutes). */
  readonly age?: Duration.DurationInput | undefined
  /** An xmin more than this many transactions old holds the horizon back (default 100,000). */
  readonly transactions?: number | undefined
}

/** A session (pg_stat_activity) whose snapshot or transaction id holds the horizon back. */
export interface HorizonSession {
  readonly _tag: "Session"
  readonly pid: number
  readonly applicationName: string
  /** Its role; null when PostgreSQL does not say (a walsender of a physical standby). */
  readonly user: string | null
  /** active, idle in transaction, ... (null without the privilege to see it: docs/operations.md) */
  readonly state: string | null
  /** client backend, walsender (a standby's feedback without a slot), ... */
  readonly backendType: string
  /** When its transaction began, epoch ms (database clock); null for a walsender's feedback (no transaction). */
  readonly transactionStart: number | null
  /** How long its transaction has been open, ms; null when it has none. */
  readonly transactionAgeMs: number | null
  /** The oldest transaction id it holds (its snapshot's xmin, else its own id) and that id's age in transactions. */
  readonly xmin: number
  readonly xminAge: number
  /** The first line of its current (or last) statement, at most 200 characters. */
  readonly query: string
}

/**
 * A replication slot holding an xmin (a standby with hot_standby_feedback:
 * every table) or a catalog_xmin (a logical slot: the system catalogs only).
 */
export interface HorizonSlot {
  readonly _tag: "Slot"
  readonly slotName: string
  /** physical or logical. */
  readonly slotType: string
  /** Whether a consumer (a standby, a logical decoding client) is connected to it now. */
  readonly active: boolean
  readonly xmin: number | null
  readonly xminAge: number | null
  readonly catalogXmin: number | null
  readonly catalogXminAge: number | null
}

/** A prepared transaction (PREPARE TRANSACTION) waiting for its COMMIT or ROLLBACK PREPARED. */
export interface HorizonPrepared {
  readonly _tag: "Prepared"
  readonly gid: string
  readonly owner: string
  /** When it was prepared, epoch ms (database clock), and how long ago. */
  readonly preparedAt: number
  readonly ageMs: number
  /** Its transaction id and that id's age in transactions. */
  readonly xid: number
  readonly xidAge: number
}

/** What holds the horizon back. */
export type HorizonHolder = HorizonSession | HorizonSlot | HorizonPrepared

/**
 * The holders of the xmin horizon of the queue's PostgreSQL database past a
 * threshold (resolved: `ageMs`, `transactions`), sessions first, then slots,
 * then prepared transactions, the oldest first within each.
 */
export interface HorizonReport {
  readonly ageMs: number
  readonly transactions: number
  readonly holders: ReadonlyArray<HorizonHolder>
}
