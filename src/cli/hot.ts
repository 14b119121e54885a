/**
 * Runs a command line hotArgv.ts read by hand (`enqueue`, `stats`): the
 * command's own effect, its failures reported as run.ts reports them (one
 * line on stderr, exit 1 or 2), with the command's logger and log level,
 * and no @effect/cli loaded.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { runEnqueue } from "./commands/enqueueRun.js"
import { runStats } from "./commands/statsRun.js"
import { reportCause } from "./errors.js"
import { runToExit } from "./exit.js"
import type { HotCommand } from "./hotArgv.js"
import { loggerLayer, printError } from "./status.js"

/** The command's effect, succeeding with its exit code. */
export const hotMain = (hot: HotCommand): Effect.Effect<number> => {
  const command: Effect.Effect<void, unknown> = hot.command === "enqueue" ? runEnqueue(hot.args) : runStats(hot.args)
  return command.pipe(
    Effect.as(0),
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.succeed(0)
      const report = reportCause(cause)
      return Effect.as(printError(`docket: ${report.line || "bad usage (see --help)"}`), report.code)
    }),
    Logger.withMinimumLogLevel(Option.getOrElse(hot.level, () => LogLevel.Warning)),
    Effect.provide(loggerLayer)
  )
}

/** Runs the command to the process's exit. */
export const runHot = (hot: HotCommand): void => runToExit(hotMain(hot))
