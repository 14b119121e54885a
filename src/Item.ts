/**
 * An item as stored and the states it moves through: what QueueRepo's reads
 * return and the read model (Insights.ts) counts and searches. Re-exported by
 * Domain.ts, beside the queue's other types; a module of its own so that
 * Domain.ts and Insights.ts both use it and neither imports the other back.
 */

/**
 * Where an item is: waiting (due now or scheduled), running (leased), done
 * (its handler succeeded: kept for the queue's retention, then pruned), dead
 * (failed for good) or cancelled (stopped by a person or its handler). Done,
 * dead and cancelled are final ("finished"): nothing claims them again.
 */
export type State = "waiting" | "running" | "done" | "dead" | "cancelled"

/** The finished states: kept for their retention (`QueueRepo.Options.retention`), then pruned. */
export type FinishedState = "done" | "dead" | "cancelled"

/**
 * One attempt's error, as the item's history keeps it (the last 20 attempts).
 * `worker` is the name of the worker that ran the attempt (null for an error
 * recorded before history existed, migration 0007).
 */
export interface AttemptError {
  /** The attempt's number, from 1 (as `attempts` counted it). */
  readonly attempt: number
  /** When it was recorded (epoch ms, database clock). */
  readonly at: number
  readonly worker: string | null
  /** The error text, as `lastError` reads (`<Tag>: <message>`). */
  readonly error: string
}

/** An item as stored, for people and tools. */
export interface Item {
  readonly id: number
  readonly kind: string
  readonly payload: unknown
  readonly key: string | null
  /** Its group inside its kind (`EnqueueOptions.group`), or null. */
  readonly group: string | null
  readonly priority: number
  readonly state: State
  readonly runAt: number
  readonly attempts: number
  /**
   * The budget its enqueue gave; null when it gave none (the worker that runs
   * it applies its handler's `maxAttempts`, else the queue's default, 8).
   */
  readonly maxAttempts: number | null
  readonly lastError: string | null
  readonly claimedBy: string | null
  readonly leaseUntil: number | null
  readonly createdAt: number
  readonly updatedAt: number
  /** The enqueuer's span context (W3C traceparent), as stored; null outside a trace. */
  readonly traceContext: string | null
  /** How many times its handler snoozed it (the `Snooze` outcome; not counted in `attempts`). */
  readonly snoozes: number
  /** When it became done, dead or cancelled (epoch ms, database clock); null while it can still run. */
  readonly finishedAt: number | null
  /**
   * What its handler returned (a done item), as stored JSON parsed: the
   * `result` Schema's encoding, or a plain task's JSON value. Null when it
   * returned none (or returned null).
   */
  readonly result: unknown
  /** Its attempts' errors, oldest first, the last 20. Kept across a retry of a dead item. */
  readonly errors: ReadonlyArray<AttemptError>
}

/**
 * The states `list` filters by: the stored states, with waiting split as
 * people read it: "waiting" is due now, "scheduled" due later. (An item
 * whose lease ran out is "running" until a claim takes it again.)
 */
export type ListState = "waiting" | "scheduled" | "running" | "done" | "dead" | "cancelled"
