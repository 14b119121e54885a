/**
 * The command lines of `enqueue`, `stats` and `worker` read by hand
 * (src/cli/hotArgv.ts, so that those commands start without @effect/cli, and
 * a worker does not hold it for its life): a line read there gives
 * the command what @effect/cli's parser gives it for the same line, and any
 * other line (help, built-ins, every kind of bad usage) is left to
 * @effect/cli, whose messages and exit codes test/cli/usage.test.ts checks.
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as CommandDescriptor from "@effect/cli/CommandDescriptor"
import * as ValidationError from "@effect/cli/ValidationError"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { describe, expect, it } from "vitest"
import { enqueue } from "../../src/cli/commands/enqueue.js"
import { stats } from "../../src/cli/commands/stats.js"
import { worker } from "../../src/cli/commands/worker.js"
import { isCliValidationError } from "../../src/cli/errors.js"
import { parseHot } from "../../src/cli/hotArgv.js"

const descriptors: Record<string, CommandDescriptor.Command<unknown>> = {
  enqueue: enqueue.descriptor,
  stats: stats.descriptor,
  worker: worker.descriptor
}

/** What @effect/cli's parser gives the command for `args` (the command's name first). */
const parsedByCli = (args: ReadonlyArray<string>) => {
  return CommandDescriptor.parse(descriptors[args[0]], [...args], CliConfig.defaultConfig).pipe(
    Effect.map((directive) => (directive._tag === "UserDefined" ? directive.value : directive)),
    Effect.provide(NodeContext.layer),
    Effect.runPromise
  )
}

describe("enqueue, stats and worker parsed by hand", () => {
  const read: ReadonlyArray<ReadonlyArray<string>> = [
    ["enqueue"],
    ["enqueue", "a"],
    ["enqueue", "a", "{}"],
    ["enqueue", "mail.send", `{"to":"a@example.com"}`, "--key", "msg-1", "--priority", "5", "--max-attempts", "3", "--database", "x.db"],
    ["enqueue", "--key", "k", "a", "{}", "--priority=-7"],
    ["enqueue", "a", "{}", "--key", "k", "--on-conflict", "replace"],
    ["enqueue", "a", "--on-conflict=replaceRunning", "--key=k", "--delay", "5s"],
    ["enqueue", "a", "{}", "--key", "k", "--on-conflict", "debounce", "--delay", "30s"],
    ["enqueue", "a", "--on-conflict", "keep"],
    ["enqueue", "report.build", "--delay", "5m", "-d", "x.db"],
    ["enqueue", "report.build", "{}", "--run-at", "2999-01-01T00:00:00Z", "--group", "g", "--schema", "app"],
    ["enqueue", "a", "--delay=1500", "--priority", "+3", "--max-attempts=10000"],
    ["enqueue", "--from", "items.ndjson", "--database=postgres://u@127.0.0.1/db"],
    ["enqueue", "--from", "-"],
    ["stats"],
    ["stats", "--json", "-d", "x.db"],
    ["stats", "--horizon-age", "10m", "--horizon-transactions=5000", "--schema", "s"],
    ["stats", "--database", "x.db", "--json"],
    ["worker", "--tasks", "tasks"],
    ["worker", "--tasks=./tasks", "-d", "x.db", "--concurrency", "50", "--lease", "1m", "--poll", "250ms", "--grace", "30s"],
    ["worker", "--tasks", "t", "--database", "postgres://u@h/db", "--listen-database", "postgres://u@h:5432/db", "--schema", "app"],
    ["worker", "--tasks", "t", "--retention", "done=1h,cancelled=7d,dead=30d", "--log-items", "--log-format", "json"],
    ["worker", "--tasks", "t", "--retention", "0", "--summary", "off", "--all-kinds"],
    ["worker", "--tasks", "t", "--retention=forever", "--summary", "5s", "--log-format", " text "],
    ["worker", "--tasks", "t", "--horizon-age", "10m", "--horizon-transactions", "1000", "--concurrency=+3"],
    ["worker", "--lease", "500ms", "--tasks", "t"],
    ["worker", "--tasks", "t", "--listen-database", "postgres://u@h/db"]
  ]

  it.each(read.map((args) => ({ args })))("$args: as @effect/cli parses it", async ({ args }) => {
    const hot = parseHot(args)
    expect(hot, "read by hand").toBeDefined()
    expect(hot!.command).toBe(args[0])
    expect(hot!.level).toEqual(Option.none())
    expect(hot!.args).toEqual(await parsedByCli(args))
  })

  it("takes the global --log-level before or after the command", () => {
    for (const args of [["--log-level", "debug", "stats", "--json"], ["stats", "--log-level=debug", "--json"]]) {
      const hot = parseHot(args)
      expect(hot?.command).toBe("stats")
      expect(hot?.level).toEqual(Option.some(LogLevel.Debug))
    }
  })

  const left: ReadonlyArray<ReadonlyArray<string>> = [
    [],
    ["dead", "list"],
    ["--help"],
    ["enqueue", "--help"],
    ["stats", "-h"],
    ["enqueue", "a", "--version"],
    ["stats", "--wizard"],
    ["stats", "--completions", "bash"],
    ["--log-level", "loud", "stats"],
    ["--json", "stats"],
    ["enqueue", "a", "{}", "--bogus"],
    ["enqueue", "a", "--bogus"],
    ["enqueue", "a", "{}", "--prio", "3"],
    ["enqueue", "a", "{}", "--priority"],
    ["enqueue", "a", "{}", "--priority", "high"],
    ["enqueue", "a", "{}", "--priority", "3000000000"],
    ["enqueue", "a", "{}", "--max-attempts", "0"],
    ["enqueue", "a", "{}", "--delay", "-5s"],
    ["enqueue", "a", "{}", "--delay", "5 parsecs"],
    ["enqueue", "a", "{}", "--run-at", "tomorrow"],
    ["enqueue", "a", "--key", "k", "--key", "l"],
    ["enqueue", "a", "--database", "x.db", "-d", "y.db"],
    ["enqueue", "a", "--group", ""],
    ["enqueue", "a", "--key", "k", "--on-conflict", "drop"],
    ["enqueue", "a", "--key", "k", "--on-conflict", "Replace"],
    ["enqueue", "a", "--key", "k", "--on-conflict", "replace-running"],
    ["enqueue", "a", "--on-conflict", "replace", "--on-conflict", "keep"],
    ["enqueue", "", "{}"],
    ["enqueue", "a", "--", "b"],
    ["enqueue", "a", "b", "c"],
    ["enqueue", "cleanup", "-1"],
    ["enqueue", "a", "--schema", "Bad-Name"],
    ["enqueue", "a", "-d=x.db"],
    ["stats", "--json=true"],
    ["stats", "--JSON"],
    ["stats", "extra"],
    ["stats", "--horizon-age", "soon"],
    ["worker"],
    ["worker", "-d", "x.db"],
    ["worker", "--tasks"],
    ["worker", "--tasks", "t", "extra"],
    ["worker", "--tasks", "t", "--concurrency", "0"],
    ["worker", "--tasks", "t", "--concurrency", "ten"],
    ["worker", "--tasks", "t", "--lease", "forever"],
    ["worker", "--tasks", "t", "--retention", "done=1h,done=2h"],
    ["worker", "--tasks", "t", "--retention", "sometimes"],
    ["worker", "--tasks", "t", "--summary", "50ms"],
    ["worker", "--tasks", "t", "--summary", "never"],
    ["worker", "--tasks", "t", "--log-format", "xml"],
    ["worker", "--tasks", "t", "--log-items=false"],
    ["worker", "--tasks", "t", "--all-kinds", "--all-kinds"],
    ["worker", "--tasks", "t", "--tasks", "u"],
    ["worker", "--tasks", "t", "--help"]
  ]

  it.each(left.map((args) => ({ args })))("$args: left to @effect/cli", ({ args }) => {
    expect(parseHot(args)).toBeUndefined()
  })
})

describe("errors.ts tells @effect/cli's ValidationError without importing it", () => {
  it("agrees with @effect/cli's own test", () => {
    const errors: ReadonlyArray<unknown> = [
      ValidationError.invalidValue(HelpDoc.p("bad")),
      ValidationError.missingValue(HelpDoc.p("missing")),
      new Error("not one"),
      { _tag: "InvalidValue" },
      null,
      "text"
    ]
    for (const error of errors) expect(isCliValidationError(error)).toBe(ValidationError.isValidationError(error))
    expect(isCliValidationError(errors[0])).toBe(true)
  })
})
