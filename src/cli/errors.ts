/**
 * How the `docket` command reports failures: one line on stderr and an exit
 * code. 0 ok, 1 failure (the database or a handler failed), 2 bad usage or bad
 * input (nothing was written).
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Option from "effect/Option"
import { errorLine, errorMessage } from "./format.js"

/** Bad usage or bad input found by the command itself (exit 2). */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/** A failure that is not bad input (exit 1), e.g. `dead retry` of an id that is not dead. */
export class CommandFailed extends Data.TaggedError("CommandFailed")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/** A `UsageError` saying what is wrong. */
export const usage = (reason: string) => new UsageError({ reason })

/**
 * Whether `error` is @effect/cli's ValidationError, by the symbol its
 * constructor sets (its isValidationError reads the same): importing
 * @effect/cli/ValidationError loads the whole parser, which the commands
 * parsed by hand (hotArgv.ts) do without. test/cli/hotArgv.test.ts checks
 * that the two agree.
 */
export const isCliValidationError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && Symbol.for("@effect/cli/ValidationError") in error

/** What to print and which exit code, for an error that reached the top. */
export interface Report {
  readonly code: 1 | 2
  /** One line, or null when @effect/cli already printed its own. */
  readonly line: string | null
}

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag
    : undefined

/** Maps a typed failure to its exit code and line. */
export const reportError = (error: unknown): Report => {
  if (isCliValidationError(error)) {
    // @effect/cli has printed its message (one line) already.
    return { code: 2, line: null }
  }
  switch (tagOf(error)) {
    case "UsageError":
    case "InvalidInput":
    case "InvalidSchedule":
      return { code: 2, line: errorLine(errorMessage(error)) }
    case "DatabaseUnavailable": {
      // A SQLite path that cannot be opened is bad input, and so is a connection
      // setting refused (`setting`: a bad sslmode); an unreachable server is a failure.
      const { target, setting } = error as { target?: unknown; setting?: unknown }
      const badInput = setting !== undefined || !/^postgres(ql)?:\/\//i.test(String(target ?? ""))
      return { code: badInput ? 2 : 1, line: errorLine(errorMessage(error)) }
    }
    default:
      return { code: 1, line: errorLine(errorMessage(error)) }
  }
}

/** Maps a cause (failure or defect) to its exit code and line. */
export const reportCause = (cause: Cause.Cause<unknown>): Report => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return reportError(failure.value)
  const defect = Cause.dieOption(cause)
  const error = Option.isSome(defect) ? defect.value : Cause.squash(cause)
  return { code: 1, line: errorLine(`unexpected error: ${errorMessage(error)}`) }
}
