/**
 * The `--help` text: made from @effect/cli's own help documents (a command's
 * `getHelp` and `getUsage`), laid out to fit 100 columns.
 *
 * Why not @effect/cli's built-in help (0.77): it prints the usage of a
 * subcommand without its parents (`$ worker`), renders every text as one
 * unbreakable run (lines of 230 characters), puts its primitive's own text
 * ("A user-defined piece of text.") above every option's description with no
 * way to drop it, says "This setting is optional." instead of the default, and
 * lists the built-in flags under every subcommand. The documents themselves
 * are right; only their layout is done here.
 */
import type * as CliConfig from "@effect/cli/CliConfig"
import * as CommandDescriptor from "@effect/cli/CommandDescriptor"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Span from "@effect/cli/HelpDoc/Span"
import * as Usage from "@effect/cli/Usage"
import type { CommandNode } from "./app.js"

/** The width help is laid out to. */
export const HELP_WIDTH = 100

const INDENT = 2
const TEXT_INDENT = 6

/** The plain text of a span (colours and emphasis dropped). */
export const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    case "Highlight":
    case "Strong":
    case "Weak":
      return spanText(span.value)
  }
}

/** A document as its list of headers, paragraphs, lists (sequences flattened). */
const flatten = (doc: HelpDoc.HelpDoc): Array<HelpDoc.HelpDoc> =>
  doc._tag === "Sequence" ? [...flatten(doc.left), ...flatten(doc.right)] : doc._tag === "Empty" ? [] : [doc]

/** `words` on lines of at most `width` (a longer word alone), every line indented by `indent` (the first by `first`). */
const fill = (words: ReadonlyArray<string>, indent: number, width: number, first: number): Array<string> => {
  const lines: Array<string> = []
  let line = ""
  let lead = first
  for (const word of words) {
    if (line !== "" && lead + line.length + 1 + word.length > width) {
      lines.push(" ".repeat(lead) + line)
      line = word
      lead = indent
    } else {
      line = line === "" ? word : `${line} ${word}`
    }
  }
  if (line !== "") lines.push(" ".repeat(lead) + line)
  return lines
}

/** `text` wrapped at word boundaries to `width`, every line indented by `indent` (the first by `first`). */
export const wrap = (text: string, indent: number, width = HELP_WIDTH, first = indent): Array<string> =>
  fill(text.split(/\s+/).filter((w) => w !== ""), indent, width, first)

/** A usage line split where it may break: at spaces outside brackets. */
const usageParts = (usage: string): Array<string> => {
  const parts: Array<string> = []
  let depth = 0
  let part = ""
  for (const ch of usage) {
    if (ch === "[" || ch === "(" || ch === "<") depth++
    if (ch === "]" || ch === ")" || ch === ">") depth--
    if (ch === " " && depth === 0) {
      if (part !== "") parts.push(part)
      part = ""
    } else {
      part += ch
    }
  }
  if (part !== "") parts.push(part)
  return parts
}

/** The usage of a command under `parents`: `docket dead retry [(-d, --database url)] ...`, wrapped. */
const usageLines = (parents: ReadonlyArray<string>, node: CommandNode, config: CliConfig.CliConfig) => {
  const own = Usage.enumerate(CommandDescriptor.getUsage(node.descriptor), config).map(spanText)[0] ?? node.name
  const parts = usageParts(own)
  const head = [...parents, parts.shift() ?? node.name].join(" ")
  if (node.children.length > 0) parts.push("<command>")
  // Each line of options under the first one's start.
  return fill([head, ...parts], INDENT + head.length + 1, HELP_WIDTH, INDENT)
}

/** The paragraphs @effect/cli adds to every option and argument that say nothing here. */
const said = (paragraph: HelpDoc.HelpDoc, index: number): boolean =>
  // The first is the primitive's own text ("A user-defined piece of text.", "An integer.").
  index > 0 && !(paragraph._tag === "Paragraph" && /^This (setting|argument) is optional\./.test(spanText(paragraph.value)))

/** An option's or argument's term: `(-d, --database <url>)` without the brackets. */
const termText = (span: Span.Span): string => spanText(span).trim().replace(/^\((.*)\)$/, "$1")

/** One section's body: paragraphs wrapped, lists as a term line and its text below. */
const body = (docs: ReadonlyArray<HelpDoc.HelpDoc>): Array<string> => {
  const out: Array<string> = []
  for (const doc of docs) {
    if (doc._tag === "Paragraph") out.push(...wrap(spanText(doc.value), INDENT))
    if (doc._tag === "DescriptionList") {
      for (const [term, block] of doc.definitions) {
        if (out.length > 0) out.push("")
        out.push(" ".repeat(INDENT) + termText(term))
        for (const p of flatten(block).filter(said)) {
          if (p._tag === "Paragraph") out.push(...wrap(spanText(p.value), TEXT_INDENT))
        }
      }
    }
  }
  return out
}

/** The sections of a command's own help (DESCRIPTION, ARGUMENTS, OPTIONS), by heading. */
const sections = (node: CommandNode, config: CliConfig.CliConfig): Map<string, Array<HelpDoc.HelpDoc>> => {
  const result = new Map<string, Array<HelpDoc.HelpDoc>>()
  let current: Array<HelpDoc.HelpDoc> | undefined
  for (const doc of flatten(CommandDescriptor.getHelp(node.descriptor, { ...config, showBuiltIns: false }))) {
    if (doc._tag === "Header") {
      current = []
      result.set(spanText(doc.value), current)
    } else if (current !== undefined) {
      current.push(doc)
    }
  }
  return result
}

/** A command's description, one paragraph (for the list of commands). */
const summary = (node: CommandNode, config: CliConfig.CliConfig): string =>
  (sections(node, config).get("DESCRIPTION") ?? []).map((d) => d._tag === "Paragraph" ? spanText(d.value) : "")
    .join(" ").trim()

/** The COMMANDS section of a group: name and description, a nested group's commands under their group's name. */
const commandList = (node: CommandNode, config: CliConfig.CliConfig): Array<string> => {
  const rows: Array<[string, string]> = []
  const add = (prefix: string, n: CommandNode) => {
    rows.push([`${prefix}${n.name}`, summary(n, config)])
    for (const child of n.children) add(`${prefix}${n.name} `, child)
  }
  for (const child of node.children) add("", child)
  const width = Math.max(...rows.map(([name]) => name.length))
  const column = INDENT + width + 2
  return rows.flatMap(([name, text]) => {
    const lines = wrap(text, column, HELP_WIDTH, column)
    lines[0] = " ".repeat(INDENT) + name + lines[0].slice(INDENT + name.length)
    return lines
  })
}

const GLOBAL_OPTIONS: ReadonlyArray<readonly [string, string]> = [
  ["--log-level all | trace | debug | info | warning | error | fatal | none", "Log messages from this level up (on stderr). Default: warning."],
  ["-h, --help", "This help; after a command, that command's help."],
  ["--version", "The version of docket."],
  ["--completions sh | bash | fish | zsh", "A completion script for the shell."]
]

/**
 * The help of `node`, a command under `parents` (`["docket", "dead"]` for
 * `docket dead retry`). Global options are listed in the root's help only;
 * they work before or after a command.
 */
export const render = (
  parents: ReadonlyArray<string>,
  node: CommandNode,
  version: string,
  config: CliConfig.CliConfig
): string => {
  const own = sections(node, config)
  const out: Array<string> = [`docket ${version}`, "", "USAGE", ...usageLines(parents, node, config)]
  for (const heading of ["DESCRIPTION", "ARGUMENTS", "OPTIONS"]) {
    const docs = own.get(heading)
    if (docs !== undefined && docs.length > 0) out.push("", heading, ...body(docs))
  }
  if (node.children.length > 0) out.push("", "COMMANDS", ...commandList(node, config))
  if (parents.length === 0) {
    out.push("", "GLOBAL OPTIONS (before or after the command)")
    GLOBAL_OPTIONS.forEach(([term, text], i) => {
      if (i > 0) out.push("")
      out.push(" ".repeat(INDENT) + term, ...wrap(text, TEXT_INDENT))
    })
    out.push("", ...wrap("See docket <command> --help for a command's options.", INDENT))
  } else {
    out.push("", ...wrap("Global options (docket --help): --log-level <level>, -h/--help, --version.", INDENT))
  }
  return out.join("\n") + "\n"
}
