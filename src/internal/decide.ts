/**
 * Deciding an item's fate from its handler's exit: done, retried (after the
 * kind's backoff or the delay a `Retry` asked for), snoozed (after the delay
 * a `Snooze` asked for), dead or cancelled, with the error text recorded as
 * `<Tag>: <message>` (see Outcome.ts for the vocabulary).
 */
import { Cause, Duration, Either, Option } from "effect"
import { Cancel, Permanent, Retry, Snooze } from "../Outcome.js"
import { checkMillis, MAX_DELAY_MS } from "./validate.js"

/** What the runtime does with an item after its handler ends. */
export type Decision =
  /** `result`: the encoded JSON value to keep with the done item (undefined: none). */
  | { readonly _tag: "Done"; readonly result?: unknown }
  | { readonly _tag: "Retry"; readonly error: string; readonly delay: Option.Option<Duration.Duration> }
  | { readonly _tag: "Dead"; readonly error: string }
  /** `error`: the Snooze as text (for logs, and the SnoozeLimit error once the cap is reached). */
  | { readonly _tag: "Snooze"; readonly error: string; readonly delayMs: number }
  /** The handler's `Cancel`: final (state cancelled), whatever attempts remain. */
  | { readonly _tag: "Cancel"; readonly error: string }

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

// A handler's delay, checked here with the storage's own bounds: one the
// storage would refuse must not reach the recorder (it would refuse the
// whole batch of outcomes, again at every write), nor throw (a defect of the
// slot, not of the item).
const checkDelay = (delay: unknown) => checkMillis("delay", delay, 0, MAX_DELAY_MS)

const retryOf = (error: Retry): Decision => {
  if (error.delay === undefined) return { _tag: "Retry", error: describeError(error), delay: Option.none() }
  const delay = checkDelay(error.delay)
  return Either.isRight(delay)
    ? { _tag: "Retry", error: describeError(error), delay: Option.some(Duration.millis(delay.right)) }
    : { _tag: "Retry", error: `${describeError(error)} (its delay was ignored: ${delay.left.reason})`, delay: Option.none() }
}

// A snooze whose delay is out of range is a bug of the handler, not a reason
// to wait: an ordinary failure (an attempt counted), so it cannot loop.
const snoozeOf = (error: Snooze): Decision => {
  const delay = checkDelay(error.delay)
  return Either.isRight(delay)
    ? { _tag: "Snooze", error: describeError(error), delayMs: delay.right }
    : { _tag: "Retry", error: `InvalidSnooze: the delay ${delay.left.reason}`, delay: Option.none() }
}

/** Decides an item's fate from its handler's failure cause (interruptions are handled by the caller). */
export const decide = (cause: Cause.Cause<unknown>): Decision => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (error instanceof Permanent) return { _tag: "Dead", error: describeError(error) }
    if (error instanceof Cancel) return { _tag: "Cancel", error: describeError(error) }
    if (error instanceof Snooze) return snoozeOf(error)
    if (error instanceof Retry) return retryOf(error)
    return { _tag: "Retry", error: describeError(error), delay: Option.none() }
  }
  const defect = Cause.dieOption(cause)
  const squashed = Option.isSome(defect) ? defect.value : Cause.squash(cause)
  const text = squashed instanceof Error ? `${squashed.name}: ${squashed.message}` : String(squashed)
  return { _tag: "Retry", error: `Defect: ${text}`, delay: Option.none() }
}
