/**
 * A command line read by hand (hotArgv.ts) run to its exit code: the
 * command's own effect, its failures reported as run.ts reports them (one
 * line on stderr, exit 1 or 2), with the command's logger and log level, and
 * no @effect/cli loaded. Shared by hot.ts (`enqueue`, `stats`: bundled) and
 * hotWorker.ts (`worker`: never bundled).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { reportCause } from "./errors.js"
import { runToExit } from "./exit.js"
import { loggerLayer, printError } from "./status.js"

/** The command's effect, succeeding with its exit code. */
const asExitCode = (command: Effect.Effect<void, unknown>, level: Option.Option<LogLevel.LogLevel>): Effect.Effect<number> =>
  command.pipe(
    Effect.as(0),
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.succeed(0)
      const report = reportCause(cause)
      return Effect.as(printError(`docket: ${report.line || "bad usage (see --help)"}`), report.code)
    }),
    Logger.withMinimumLogLevel(Option.getOrElse(level, () => LogLevel.Warning)),
    Effect.provide(loggerLayer)
  )

/** Runs the command to the process's exit. */
export const runToExitCode = (command: Effect.Effect<void, unknown>, level: Option.Option<LogLevel.LogLevel>): void =>
  runToExit(asExitCode(command, level))
