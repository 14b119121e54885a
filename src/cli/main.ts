/**
 * The `docket` command's entry point, run by bin/docket.mjs: compiled
 * (dist/cli/main.js) in an installed package, under tsx in a git checkout.
 * SIGINT/SIGTERM interrupt the main fiber (NodeRuntime.runMain), which shuts a
 * running worker down gracefully; the process then exits 0.
 */
import { Command } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Logger, LogLevel } from "effect"
import { readFileSync } from "node:fs"
import { root } from "./app.js"
import { reportCause } from "./errors.js"
import { errorLine } from "./format.js"
import { loggerLayer, printError } from "./status.js"

// The package's root is two folders up from src/cli/main.ts and from dist/cli/main.js alike.
const version = (() => {
  try {
    return String(JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version)
  } catch {
    return "0.0.0"
  }
})()

const ANSI = /\x1b\[[0-9;]*m/g

const cli = Command.run(root, { name: "docket", version, executable: "docket" })

/** Runs the command line; succeeds with the exit code. */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.gen(function*() {
    // @effect/cli prints its usage errors with Console.error (and a blank
    // line): they are caught here and printed as one line like every other error.
    const usageErrors: Array<string> = []
    const base = yield* Effect.console
    const plain = (args: ReadonlyArray<unknown>) =>
      process.stdout.isTTY ? args : args.map((a) => (typeof a === "string" ? a.replace(ANSI, "") : a))
    const console: typeof base = {
      ...base,
      // The help text without colours when it goes to a pipe or a file.
      log: (...args: ReadonlyArray<unknown>) => base.log(...plain(args)),
      error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void usageErrors.push(args.map(String).join(" ")))
    }
    return yield* Effect.suspend(() => cli(argv)).pipe(
      Effect.withConsole(console),
      Effect.as(0),
      Effect.catchAllCause((cause) => {
        if (Cause.isInterruptedOnly(cause)) return Effect.succeed(0)
        const report = reportCause(cause)
        const line = report.line ?? errorLine(usageErrors.join(" ").replace(ANSI, ""))
        return Effect.as(printError(`docket: ${line || "bad usage (see --help)"}`), report.code)
      })
    )
  }).pipe(
    Logger.withMinimumLogLevel(LogLevel.Warning),
    Effect.provide(loggerLayer),
    Effect.provide(NodeContext.layer)
  )

NodeRuntime.runMain(main(process.argv), {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit) => {
    // Always exit: a finished command must not linger on an open handle.
    process.exit(Exit.isSuccess(exit) ? Number(exit.value) : Cause.isInterruptedOnly(exit.cause) ? 0 : 1)
  }
})
