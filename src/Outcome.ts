/**
 * The outcomes a handler can choose, as typed failures in its error channel.
 * Success means done (kept as done for the retention, with its result when the
 * handler has a `result` Schema). Otherwise:
 *
 * - `Retry`: try again after the kind's backoff, or after `delay` if given.
 *   Any other typed failure is treated the same way.
 * - `Permanent`: dead at once, whatever attempts remain (the input can never work).
 * - `Cancel`: cancelled at once, whatever attempts remain: the work is no
 *   longer wanted (the order was withdrawn, the user left). The item is kept
 *   with state `cancelled`, final like dead, but counted apart from failures
 *   (the `cancelled` count of `QueueRepo.stats`, the `Cancelled` event): Oban's and River's
 *   vocabulary (earlier releases kept it as dead). A person cancels an item with
 *   `QueueRepo.cancel` or `docket cancel`.
 * - `Snooze`: not now, and not a failure: waiting again for `delay`, this
 *   attempt not counted (the item's `snoozes` counts instead), up to the
 *   kind's `maxSnoozes` (default 100); past it the item is dead
 *   (`SnoozeLimit`).
 *
 * The runtime adds its own: `Timeout` (the kind's timeout passed: retried),
 * `DecodeError` (the payload does not match the kind's schema: dead at once),
 * `UnknownKind` (no handler: dead at once) and `Defect` (a thrown exception or
 * `Effect.die`: retried). Each is recorded in the item's `last_error` as
 * `<Tag>: <message>`.
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"

/** Try again: after `delay`, or after the kind's backoff when no delay is given. */
export class Retry extends Data.TaggedError("Retry")<{
  readonly reason: string
  readonly delay?: Duration.DurationInput | undefined
}> {
  override get message(): string {
    return this.reason
  }
}

/** Dead at once: the work can never succeed (a bad address, a 410 Gone). */
export class Permanent extends Data.TaggedError("Permanent")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/** Cancelled at once (final, state `cancelled`, not retried): the work is no longer wanted. */
export class Cancel extends Data.TaggedError("Cancel")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/**
 * Not now: the item waits again and is due after `delay` (a `Duration` input
 * or milliseconds, from 0 to about 100 years), this attempt not counted. For
 * work that is not ready yet rather than broken (an export still being
 * built, a rate limit's window, a dependency not done): polling with `Retry`
 * would spend the attempts meant for real failures. The item's `snoozes`
 * goes up by one (`job.snoozes` shows it); a kind allows `maxSnoozes`
 * (default 100), past which the item is dead with `SnoozeLimit`. A delay out
 * of range is an ordinary failure (retried with the kind's backoff, recorded
 * as `InvalidSnooze`).
 */
export class Snooze extends Data.TaggedError("Snooze")<{
  readonly delay: Duration.DurationInput
  /** Why, for logs and the `SnoozeLimit` error (default: "snoozed for <delay>"). */
  readonly reason?: string | undefined
}> {
  override get message(): string {
    if (this.reason !== undefined) return this.reason
    // Never throws, whatever the delay (a bad one is reported by the runtime).
    const delay = Duration.decodeUnknown(this.delay)
    const text = delay._tag === "Some" ? Duration.format(delay.value) : String(this.delay)
    return `snoozed for ${text === "0" ? "0ms" : text}`
  }
}

/** The kind's timeout passed before the handler finished: retried. */
export class Timeout extends Data.TaggedError("Timeout")<{ readonly after: Duration.Duration }> {
  override get message(): string {
    return `the handler ran longer than ${Duration.format(this.after)}`
  }
}
