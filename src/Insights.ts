/**
 * The read model's types: how long the oldest due item of each kind has
 * waited, what finished and what was retried per minute and in all, and a
 * search over the items (QueueRepo's `oldestDue`, `finishedPerMinute`,
 * `retriedPerMinute`, `totals`, `searchItems`): what the dashboard and
 * /metrics read. Re-exported by
 * Domain.ts, beside the queue's other types.
 */
import type { FinishedState, Item, ListState } from "./Item.js"

/** A kind's due items (waiting and due, or running with an ended lease) and how long the oldest has been due. */
export interface OldestDue {
  readonly kind: string
  /** Milliseconds from the oldest due item's due time (its run-after, or its lease's end) to the database's now. */
  readonly ageMs: number
  /** How many of its items are due. */
  readonly due: number
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
