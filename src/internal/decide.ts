/**
 * Deciding an item's fate from its handler's exit: done, retried (after the
 * kind's backoff or the delay a `Retry` asked for), dead or cancelled, with
 * the error text recorded as `<Tag>: <message>` (see Outcome.ts for the
 * vocabulary).
 */
import { Cause, Duration, Option } from "effect"
import { Cancel, Permanent, Retry } from "../Outcome.js"

/** What the runtime does with an item after its handler ends. */
export type Decision =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Retry"; readonly error: string; readonly delay: Option.Option<Duration.Duration> }
  | { readonly _tag: "Dead"; readonly error: string }
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

/** Decides an item's fate from its handler's failure cause (interruptions are handled by the caller). */
export const decide = (cause: Cause.Cause<unknown>): Decision => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (error instanceof Permanent) return { _tag: "Dead", error: describeError(error) }
    if (error instanceof Cancel) return { _tag: "Cancel", error: describeError(error) }
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
