/**
 * The `docket` command, loaded by main.ts (the entry point, run by
 * bin/docket.mjs: compiled, dist/cli/main.js, in an installed package, under
 * tsx in a git checkout) once the heap's flags are set, for every command
 * line hotArgv.ts does not read by hand. SIGINT/SIGTERM interrupt the main
 * fiber (exit.ts), which shuts a running worker down gracefully; the process
 * then exits 0.
 */
import * as BuiltInOptions from "@effect/cli/BuiltInOptions"
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as CommandDescriptor from "@effect/cli/CommandDescriptor"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { docketVersion } from "../internal/version.js"
import { root, tree } from "./app.js"
import { argumentProblem, commandOf, takeLogLevel } from "./argv.js"
import { reportCause } from "./errors.js"
import { runToExit } from "./exit.js"
import { errorLine } from "./format.js"
import * as Help from "./help.js"
import { loggerLayer, printError } from "./status.js"

const version = docketVersion()

const ANSI = /\x1b\[[0-9;]*m/g

const cli = Command.run(root, { name: "docket", version, executable: "docket" })

/**
 * Whether the arguments ask for help: `--help`/`-h` (as @effect/cli's own
 * parser reads them), or a group (`docket`, `docket dead`) without its command.
 * Then the help is ours (help.ts); everything else is run by `cli`.
 */
const helpWanted = (args: ReadonlyArray<string>) =>
  CommandDescriptor.parse(root.descriptor, ["docket", ...args], CliConfig.defaultConfig).pipe(
    Effect.map((directive) =>
      directive._tag === "BuiltIn"
        ? BuiltInOptions.isShowHelp(directive.option)
        : commandOf(tree, args).node.children.length > 0
    ),
    Effect.orElseSucceed(() => false)
  )

const showHelp = (args: ReadonlyArray<string>) =>
  Effect.sync(() => {
    const { node, path } = commandOf(tree, args)
    process.stdout.write(Help.render(path.slice(0, -1), node, version, CliConfig.defaultConfig))
  })

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
    const fail = (line: string, code: 1 | 2) => Effect.as(printError(`docket: ${line}`), code)
    const global = takeLogLevel(argv.slice(2))
    if (Either.isLeft(global)) return yield* fail(global.left.reason, 2)
    const { level, rest } = global.right
    const run = Effect.if(helpWanted(rest), {
      onTrue: () => showHelp(rest),
      onFalse: () => cli([...argv.slice(0, 2), ...rest])
    })
    return yield* run.pipe(
      Effect.withConsole(console),
      Effect.as(0),
      Effect.catchAllCause((cause) => {
        if (Cause.isInterruptedOnly(cause)) return Effect.succeed(0)
        const report = reportCause(cause)
        // A mistyped command or flag is named first, with the closest right one.
        const problem = report.code === 2 ? argumentProblem(tree, rest) : undefined
        const line = problem ?? report.line ?? errorLine(usageErrors.join(" ").replace(ANSI, ""))
        return fail(line || "bad usage (see --help)", report.code)
      }),
      Logger.withMinimumLogLevel(Option.getOrElse(level, () => LogLevel.Warning))
    )
  }).pipe(
    Effect.provide(loggerLayer),
    // What @effect/cli needs, not all of NodeContext (its command executor and
    // worker manager): 16 modules fewer at every start.
    Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeTerminal.layer))
  )

runToExit(main(process.argv))
