/**
 * An item's outcome, in the domain's words, from its handler's exit to the
 * recorder's write (`Outcome`), and deciding it from the handler's exit
 * (`decide`): done, retried (after the kind's backoff or the delay a `Retry`
 * asked for), snoozed (after the delay a `Snooze` asked for), dead or
 * cancelled, with the error text recorded as `<Tag>: <message>` (see
 * Outcome.ts for the vocabulary).
 *
 * One type on the whole way: `decide` and the executor's own checks (unknown
 * kind, attempts spent, a payload that does not decode) make an `Outcome`;
 * the executor settles it (a retry's delay from the kind's backoff, dead once
 * the attempts or the snoozes are spent) and hands it to the recorder with
 * its claim (`Finished`); the recorder writes it through the repository's
 * `completeMany`, `failMany` or `snoozeMany` by its tag.
 */
import * as Cause from "effect/Cause"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { Claim } from "../Domain.js"
import { Cancel, Permanent, Retry, Snooze } from "../Outcome.js"
import { checkMillis, MAX_DELAY_MS } from "./validate.js"

/**
 * What becomes of an item after its handler ends. `RetryDelay` is a retry's
 * delay in ms: `number | undefined` as decided from the handler's exit
 * (undefined: the kind's backoff decides), `number` once the executor has
 * settled it (the default: what the recorder writes).
 */
export type Outcome<RetryDelay extends number | undefined = number> =
  /** `result`: the encoded JSON value to keep with the done item (undefined: none). */
  | { readonly _tag: "Done"; readonly result?: unknown }
  /** Waiting again after `delayMs`, an attempt counted (dead instead once the attempts are spent: the executor checks). */
  | { readonly _tag: "Retry"; readonly error: string; readonly delayMs: RetryDelay }
  | { readonly _tag: "Dead"; readonly error: string }
  /**
   * Waiting again after `delayMs`, the attempt not counted, within the kind's
   * cap on snoozes (the executor checks). `error`: the Snooze as text (its
   * reason in logs and events, and the SnoozeLimit error once the cap is reached).
   */
  | { readonly _tag: "Snooze"; readonly error: string; readonly delayMs: number }
  /** The handler's `Cancel`: final (state cancelled), whatever attempts remain. */
  | { readonly _tag: "Cancel"; readonly error: string }

/** A finished run waiting to be recorded: its settled outcome, its claim (the write's fence) and how long it ran. */
export interface Finished {
  readonly claim: Claim
  readonly outcome: Outcome
  readonly durationMs: number
}

/** The outcome of a run that returned no value to keep (shared: nothing made per item). */
export const DONE: Outcome = { _tag: "Done" }

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

const retryOf = (error: Retry): Outcome<number | undefined> => {
  if (error.delay === undefined) return { _tag: "Retry", error: describeError(error), delayMs: undefined }
  const delay = checkDelay(error.delay)
  return Either.isRight(delay)
    ? { _tag: "Retry", error: describeError(error), delayMs: delay.right }
    : { _tag: "Retry", error: `${describeError(error)} (its delay was ignored: ${delay.left.reason})`, delayMs: undefined }
}

// A snooze whose delay is out of range is a bug of the handler, not a reason
// to wait: an ordinary failure (an attempt counted), so it cannot loop.
const snoozeOf = (error: Snooze): Outcome<number | undefined> => {
  const delay = checkDelay(error.delay)
  return Either.isRight(delay)
    ? { _tag: "Snooze", error: describeError(error), delayMs: delay.right }
    : { _tag: "Retry", error: `InvalidSnooze: the delay ${delay.left.reason}`, delayMs: undefined }
}

/** Decides an item's fate from its handler's failure cause (interruptions are handled by the caller). */
export const decide = (cause: Cause.Cause<unknown>): Outcome<number | undefined> => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (error instanceof Permanent) return { _tag: "Dead", error: describeError(error) }
    if (error instanceof Cancel) return { _tag: "Cancel", error: describeError(error) }
    if (error instanceof Snooze) return snoozeOf(error)
    if (error instanceof Retry) return retryOf(error)
    return { _tag: "Retry", error: describeError(error), delayMs: undefined }
  }
  const defect = Cause.dieOption(cause)
  const squashed = Option.isSome(defect) ? defect.value : Cause.squash(cause)
  const text = squashed instanceof Error ? `${squashed.name}: ${squashed.message}` : String(squashed)
  return { _tag: "Retry", error: `Defect: ${text}`, delayMs: undefined }
}
