/**
 * What the command reads from its arguments before (and after) @effect/cli
 * parses them: the global `--log-level` wherever it stands, which command the
 * arguments name, and, when parsing failed, the first flag or command name
 * that is wrong, with the closest right one.
 *
 * @effect/cli takes its built-in `--log-level` only before the subcommand
 * (after it, `Received unknown argument`; a bad level says `Invalid
 * subcommand`) and suggests a flag only in some positions (`--concurency 5`
 * is an "unknown argument"). Its parser still parses everything; these read
 * the command tree it is given (names and the `Usage` of each command).
 */
import * as AutoCorrect from "@effect/cli/AutoCorrect"
import * as CliConfig from "@effect/cli/CliConfig"
import * as CommandDescriptor from "@effect/cli/CommandDescriptor"
import type * as Usage from "@effect/cli/Usage"
import * as Option from "effect/Option"
import type { CommandNode } from "./app.js"

export { takeLogLevel } from "./logLevel.js"

/** The command the arguments name: the path of names from the root (`["docket", "dead", "list"]`) and its node. */
export const commandOf = (
  tree: CommandNode,
  args: ReadonlyArray<string>
): { readonly path: ReadonlyArray<string>; readonly node: CommandNode; readonly rest: ReadonlyArray<string> } => {
  let node = tree
  const path = [tree.name]
  let rest = args
  // As @effect/cli does: a group's command is the first argument that names one of its subcommands.
  for (;;) {
    const at = rest.findIndex((arg) => node.children.some((c) => c.name === arg))
    if (at < 0 || rest.slice(0, at).includes("--")) return { path, node, rest }
    node = node.children.find((c) => c.name === rest[at])!
    path.push(node.name)
    rest = rest.slice(at + 1)
  }
}

/** A command's flags: each name (aliases too) and whether it takes a value. */
export const flagsOf = (node: CommandNode): Map<string, boolean> => {
  const flags = new Map<string, boolean>()
  const walk = (u: Usage.Usage): void => {
    switch (u._tag) {
      case "Named":
        for (const name of u.names) if (name.startsWith("-")) flags.set(name, Option.isSome(u.acceptedValues))
        return
      case "Optional":
      case "Repeated":
        return walk(u.usage)
      case "Alternation":
      case "Concat":
        walk(u.left)
        return walk(u.right)
      default:
        return
    }
  }
  walk(CommandDescriptor.getUsage(node.descriptor))
  for (const builtIn of ["--help", "-h", "--version", "--wizard"]) flags.set(builtIn, false)
  flags.set("--completions", true)
  return flags
}

const closest = (word: string, candidates: ReadonlyArray<string>): string | undefined => {
  // A word that starts only one name (--prio for --priority).
  const starting = word.length >= 3 ? candidates.filter((name) => name.startsWith(word)) : []
  if (starting.length === 1) return starting[0]
  let best: { name: string; distance: number } | undefined
  for (const name of candidates) {
    const distance = AutoCorrect.levensteinDistance(word, name, CliConfig.defaultConfig)
    if (best === undefined || distance < best.distance) best = { name, distance }
  }
  // Close enough to be a typo: at most 2 edits, and fewer than a third of the word.
  return best !== undefined && best.distance <= Math.min(2, Math.ceil(word.length / 3)) ? best.name : undefined
}

/** Flags that were removed, and what to do instead. */
const REMOVED: Record<string, string> = {
  "--handled-only":
    "--handled-only was removed: a worker claims only the kinds of its task files by default " +
    "(--all-kinds claims every kind)"
}

/** The values a built-in flag takes. */
const CHOICES: Record<string, ReadonlyArray<string>> = { "--completions": ["sh", "bash", "fish", "zsh"] }

/** What is wrong with a flag's value, if anything (a built-in's choice). */
const valueProblem = (name: string, value: string): string | undefined => {
  const choices = CHOICES[name]
  return choices === undefined || choices.includes(value)
    ? undefined
    : `${name}: '${value}' is not one of ${choices.join(", ")}`
}

const unknownCommand = (node: CommandNode, path: ReadonlyArray<string>, word: string): string => {
  const names = node.children.map((c) => c.name)
  const guess = closest(word, names)
  const where = path.slice(1)
  return `unknown command ${[...where, word].join(" ")}` +
    (guess === undefined ? ` (commands: ${names.join(", ")})` : ` (did you mean ${[...where, guess].join(" ")}?)`)
}

/**
 * The first thing wrong with the arguments' command or flags, said on one
 * line: an unknown command or flag (with the closest right one), a flag
 * without its value, a built-in's value that is not one of its choices. None
 * when every command and flag is known.
 */
export const argumentProblem = (tree: CommandNode, args: ReadonlyArray<string>): string | undefined => {
  const { node, path, rest } = commandOf(tree, args)
  const flags = flagsOf(node)
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]
    if (arg === "--") break
    if (!/^--?[A-Za-z]/.test(arg)) {
      // A group's only positional argument is its command.
      if (node.children.length > 0) return unknownCommand(node, path, arg)
      continue
    }
    const [name, ...inline] = arg.split("=")
    const takesValue = flags.get(name)
    if (takesValue === undefined) {
      if (REMOVED[name] !== undefined) return REMOVED[name]
      const guess = closest(name, [...flags.keys()].filter((f) => f.startsWith("--")))
      return `unknown option ${name} for ${path.join(" ")}` + (guess === undefined ? "" : ` (did you mean ${guess}?)`)
    }
    if (!takesValue) continue
    if (inline.length > 0) {
      const problem = valueProblem(name, inline.join("="))
      if (problem !== undefined) return problem
      continue
    }
    // Followed by nothing, or by another of the command's flags (`--priority --database x`).
    const next = rest[i + 1]
    if (next === undefined || flags.has(next.split("=")[0])) return `${name} needs a value`
    const problem = valueProblem(name, next)
    if (problem !== undefined) return problem
    i++
  }
  return undefined
}
