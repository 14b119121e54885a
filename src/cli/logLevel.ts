/**
 * The global `--log-level <level>`, taken from the arguments wherever it
 * stands (before `--`): read by run.ts before @effect/cli parses the rest,
 * and by the hand-parsed commands (hotArgv.ts), which do without @effect/cli.
 */
import * as Either from "effect/Either"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { usage, type UsageError } from "./errors.js"

export const LEVELS = ["all", "trace", "debug", "info", "warning", "error", "fatal", "none"] as const

/** The arguments without `--log-level <level>` / `--log-level=<level>` (anywhere before `--`), and the level. */
export const takeLogLevel = (
  args: ReadonlyArray<string>
): Either.Either<{ readonly level: Option.Option<LogLevel.LogLevel>; readonly rest: ReadonlyArray<string> }, UsageError> => {
  const rest: Array<string> = []
  let level: Option.Option<LogLevel.LogLevel> = Option.none()
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === "--") {
      rest.push(...args.slice(i))
      break
    }
    if (arg !== "--log-level" && !arg.startsWith("--log-level=")) {
      rest.push(arg)
      continue
    }
    const value = arg === "--log-level" ? args[++i] : arg.slice("--log-level=".length)
    if (value === undefined) return Either.left(usage(`--log-level needs a value: ${LEVELS.join(", ")}`))
    const name = value.toLowerCase()
    if (!(LEVELS as ReadonlyArray<string>).includes(name)) {
      return Either.left(usage(`--log-level: '${value}' is not one of ${LEVELS.join(", ")}`))
    }
    level = Option.some(LogLevel.fromLiteral(`${name[0].toUpperCase()}${name.slice(1)}` as LogLevel.Literal))
  }
  return Either.right({ level, rest })
}
