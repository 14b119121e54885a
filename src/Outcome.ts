/**
 * The outcomes a handler can choose, as typed failures in its error channel.
 * Success means done (the item leaves the queue). Otherwise:
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
 *
 * The runtime adds its own: `Timeout` (the kind's timeout passed: retried),
 * `DecodeError` (the payload does not match the kind's schema: dead at once),
 * `UnknownKind` (no handler: dead at once) and `Defect` (a thrown exception or
 * `Effect.die`: retried). Each is recorded in the item's `last_error` as
 * `<Tag>: <message>`.
 */
import { Data, Duration } from "effect"

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

/** The kind's timeout passed before the handler finished: retried. */
export class Timeout extends Data.TaggedError("Timeout")<{ readonly after: Duration.Duration }> {
  override get message(): string {
    return `the handler ran longer than ${Duration.format(this.after)}`
  }
}
