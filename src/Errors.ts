/**
 * The typed errors of Docket's storage layer.
 *
 * Every operation of {@link QueueRepo} fails with one of these, never with an
 * exception: bad input is refused before anything is written, and a database
 * failure is reported as a `StorageError` so the caller knows the operation did
 * not take effect (an enqueue that fails with it was not queued).
 */
import * as Data from "effect/Data"

/** The field of an operation's input that was refused. */
export type InvalidField =
  | "kind"
  | "payload"
  | "key"
  /** What a second enqueue of a held key does (`EnqueueOptions.onConflict`): not one of the modes. */
  | "onConflict"
  /** An item's group (`EnqueueOptions.group`): empty, too long, not text. */
  | "group"
  /** A kind's `perGroup` limits: a concurrency that is not an integer from 1, an `ordered` that is not a boolean, an `onFailure`, `onDead` or `rate` not one allowed. */
  | "perGroup"
  | "delay"
  | "runAt"
  | "priority"
  | "maxAttempts"
  | "maxSnoozes"
  /** A workflow deferred's token (`DurableDeferred.token`): not one. */
  | "token"
  /** A workflow's `execute` that waits for its result inside a transaction (give `discard: true` there). */
  | "discard"
  | "limit"
  | "lease"
  | "worker"
  | "error"
  | "ids"
  | "concurrency"
  | "rate"
  | "page"
  /** A worker pool's registration or heartbeat (the reason names the property). */
  | "pool"
  /** A heartbeat age: the age after which a pool is gone, or removed. */
  | "age"
  | "reason"
  /** A completion's result: not JSON, or larger than `maxResultBytes`. */
  | "result"
  /** A `list` cursor that is malformed or from another listing. */
  | "cursor"
  /** A `list` state filter that names no state. */
  | "state"
  /** A retention that is not a duration from 0 to about 100 years, nor "forever". */
  | "retention"
  /** A recurring schedule's declaration given to the store unchecked (the reason names what). */
  | "schedule"
  /** A `searchItems` text that is empty or too long. */
  | "text"
  /** A `finishedPerMinute` or `retriedPerMinute` window out of range. */
  | "minutes"
  /** A dashboard's options (the reason names which). */
  | "dashboard"
  /** A `horizon` threshold: an age that is not a duration from 0 to a year, or a count of transactions out of range. */
  | "horizon"
  /** `Database.Options.schema`: not a plain identifier, too long, or given for SQLite. */
  | "schema"

/** Bad input: nothing was written. `field` names what was wrong, `reason` says how. */
export class InvalidInput extends Data.TaggedError("InvalidInput")<{
  readonly field: InvalidField
  readonly reason: string
}> {
  override get message(): string {
    return `invalid ${this.field}: ${this.reason}`
  }
}

/** The database refused or could not be reached; the operation did not take effect. */
export class StorageError extends Data.TaggedError("StorageError")<{
  readonly operation: string
  readonly cause: unknown
}> {
  override get message(): string {
    const cause = this.cause
    const detail = cause instanceof Error
      ? (cause.cause instanceof Error ? `${cause.message}: ${cause.cause.message}` : cause.message)
      : String(cause)
    return `storage error in ${this.operation}: ${detail}`
  }
}

/** Migrating the database failed (or timed out waiting for another migrator). */
export class MigrationFailed extends Data.TaggedError("MigrationFailed")<{
  readonly reason: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `migration failed: ${this.reason}`
  }
}

/**
 * The database named cannot be opened or reached. `setting`, when present,
 * names the connection setting that is wrong (`sslmode`, `sslrootcert`, ...):
 * it was refused before anything connected.
 */
export class DatabaseUnavailable extends Data.TaggedError("DatabaseUnavailable")<{
  readonly target: string
  readonly reason: string
  readonly setting?: string | undefined
  readonly cause?: unknown
}> {
  override get message(): string {
    return `cannot open ${this.target}: ${this.reason}`
  }
}

/**
 * A recurring schedule (`Recurring.make`) that cannot run: a cron expression
 * or time zone effect's `Cron` refuses, a name that is not a valid name, a
 * payload that is not JSON, or a name declared twice in one pool. A worker
 * pool refuses to start with it (nothing is written), naming the schedule.
 */
export class InvalidSchedule extends Data.TaggedError("InvalidSchedule")<{
  readonly name: string
  readonly reason: string
}> {
  override get message(): string {
    return `invalid schedule ${JSON.stringify(this.name)}: ${this.reason}`
  }
}
