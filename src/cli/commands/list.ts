/**
 * `docket list`: items newest first, a page at a time (--limit), of a state
 * and a kind if given; the last line says how to get the next page (the
 * cursor). `--json` prints `{ items, cursor }`. A SQLite file that does not
 * exist is refused, not made.
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as QueueRepo from "../../QueueRepo.js"
import { clip, foldLines, isoSeconds, table } from "../format.js"
import { databaseOption, integerOption, jsonOption, kindOption, optionalText, withDefault } from "../options.js"
import { withExistingRepo } from "../queue.js"

const FINISHED = new Set<QueueRepo.State>(["done", "dead", "cancelled"])

// What a person looks for first: a finished item's outcome, a waiting one's due time.
const when = (item: QueueRepo.Item) =>
  isoSeconds(FINISHED.has(item.state) && item.finishedAt !== null ? item.finishedAt : item.runAt)

const outcome = (item: QueueRepo.Item) =>
  item.state === "done"
    ? (item.result === null ? "-" : JSON.stringify(item.result))
    : item.lastError === null ? "-" : foldLines(item.lastError)

const row = (item: QueueRepo.Item) => [
  String(item.id),
  clip(item.kind, 24),
  item.state,
  String(item.attempts),
  when(item),
  clip(outcome(item), 40)
]

/** A page as a text table: id, kind, state, attempts, when (finished, else due), result or last error. */
export const pageTable = (items: ReadonlyArray<QueueRepo.Item>): string =>
  table([["id", "kind", "state", "attempts", "when", "result / last error"], ...items.map(row)], new Set([0, 3]))

const config = {
  database: databaseOption,
  state: optionalText(
    "state",
    "state",
    "Only items in this state: waiting (due now), scheduled (due later), running, done, dead or cancelled."
  ),
  kind: kindOption("Only items of this kind."),
  limit: integerOption("limit", "Items per page, from 1 to 1000.", { min: 1, max: 1000 }).pipe(withDefault(50)),
  cursor: optionalText("cursor", "cursor", "The next page: the cursor the previous page printed (same --state and --kind)."),
  json: jsonOption
}

// The command that prints the next page, as the last line says it.
const nextCommand = (args: { state: Option.Option<string>; kind: Option.Option<string>; limit: number }, cursor: string) =>
  [
    "docket list",
    ...Option.match(args.state, { onNone: () => [], onSome: (s) => [`--state ${s}`] }),
    ...Option.match(args.kind, { onNone: () => [], onSome: (k) => [`--kind ${k}`] }),
    ...(args.limit === 50 ? [] : [`--limit ${args.limit}`]),
    `--cursor ${cursor}`
  ].join(" ")

/** The `list` command. */
export const list = Command.make("list", config, (args) =>
  withExistingRepo(args.database, (repo) =>
    repo.list({
      state: Option.getOrUndefined(args.state) as QueueRepo.ListState | undefined,
      kind: Option.getOrUndefined(args.kind),
      limit: args.limit,
      cursor: Option.getOrUndefined(args.cursor)
    })).pipe(
      Effect.flatMap((page) => {
        if (args.json) return Console.log(JSON.stringify(page))
        if (page.items.length === 0) return Console.log("no items")
        const more = page.cursor === null ? "no more items" : `more: ${nextCommand(args, page.cursor)}`
        return Console.log(`${pageTable(page.items)}\n${more}`)
      })
    )).pipe(
    Command.withDescription(
      "Lists items newest first (finished ones by the time they finished), a page at a time; the last " +
        "line gives the command for the next page."
    )
  )
