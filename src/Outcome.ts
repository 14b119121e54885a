/**
 * The outcomes a handler can choose, as typed failures in its error channel.
 * Success means done (the item leaves the queue). Otherwise:
 *
 * - `Retry`: try again after the kind's backoff, or after `delay` if given.
 *   Any other typed failure is treated the same way.
 * - `Permanent`: dead at once, whatever attempts remain (the input can never work).
 * - `Cancel`: dead at once; the work is no longer wanted.
 *
 * The runtime adds its own: `Timeout` (the kind's timeout passed: retried),
 * `DecodeError` (the payload does not match the kind's schema: dead at once),
 * `UnknownKind` (no handler: dead at once) and `Defect` (a thrown exception or
 * `Effect.die`: retried). Each is recorded in the item's `last_error` as
 * `<Tag>: <message>`.
 */
import { Cause, Data, Duration, Option } from "effect"

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

/** Dead at once: the work is no longer wanted. */
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

/** What the runtime does with an item after its handler ends. */
export type Decision =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Retry"; readonly error: string; readonly delay: Option.Option<Duration.Duration> }
  | { readonly _tag: "Dead"; readonly error: string }

const describeError = (error: unknown): string => {
  if (error instanceof Error) {
    const tag = (error as { _tag?: unknown })._tag
    const name = typeof tag === "string" ? tag : error.name
    return error.message ? `${name}: ${error.message}` : name
  }
  if (typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string") {
    const message = "message" in error && typeof error.message === "string" ? error.message : JSON.stringify(error)
    return `${error._tag}: ${message}`
  }
  return `Error: ${typeof error === "string" ? error : JSON.stringify(error) ?? String(error)}`
}

/** Decides an item's fate from its handler's failure cause (interruptions are handled by the caller). */
export const decide = (cause: Cause.Cause<unknown>): Decision => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (error instanceof Permanent || error instanceof Cancel) return { _tag: "Dead", error: describeError(error) }
    if (error instanceof Retry) {
      return {
        _tag: "Retry",
        error: describeError(error),
        delay: error.delay === undefined ? Option.none() : Option.some(Duration.decode(error.delay))
      }
    }
    return { _tag: "Retry", error: describeError(error), delay: Option.none() }
  }
  const defect = Cause.dieOption(cause)
  const squashed = Option.isSome(defect) ? defect.value : Cause.squash(cause)
  const text = squashed instanceof Error ? `${squashed.name}: ${squashed.message}` : String(squashed)
  return { _tag: "Retry", error: `Defect: ${text}`, delay: Option.none() }
}
