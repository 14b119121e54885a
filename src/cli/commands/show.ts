/**
 * `docket show ID`: one item with every field, its attempts' errors and its
 * result; `--json` prints the item as the library returns it. A SQLite file
 * that does not exist is refused, not made.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as QueueRepo from "../../QueueRepo.js"
import { CommandFailed } from "../errors.js"
import { isoSeconds } from "../format.js"
import { databaseOption, jsonOption, readInteger } from "../options.js"
import { withExistingRepo } from "../queue.js"

const idArg = Args.text({ name: "id" }).pipe(
  Args.withDescription("The item's id."),
  Args.mapEffect((text) =>
    Either.match(readInteger("id", text, { min: 1 }), {
      onLeft: () => Effect.fail(HelpDoc.p(`'${text}' is not an item id`)),
      onRight: Effect.succeed
    })
  )
)

const time = (ms: number | null) => (ms === null ? "-" : isoSeconds(ms))

// A multi-line text under its label, every line indented alike.
const block = (text: string, indent: string) => text.split(/\r?\n/).join(`\n${indent}`)

/** The item as text: a field a line, then the attempts' errors (oldest first), then the result. */
export const itemText = (item: QueueRepo.Item): string => {
  const pad = "              "
  const attempts = item.maxAttempts === null ? `${item.attempts} (budget: its handler's, else 8)` : `${item.attempts} of ${item.maxAttempts}`
  const fields: Array<[string, string]> = [
    ["id", String(item.id)],
    ["kind", item.kind],
    ["state", item.state],
    ["key", item.key ?? "-"],
    ...(item.group === null ? [] : [["group", item.group] as [string, string]]),
    ["priority", String(item.priority)],
    ["attempts", attempts],
    ["snoozes", String(item.snoozes)],
    ["created", time(item.createdAt)],
    ["run at", time(item.runAt)],
    ["finished", time(item.finishedAt)],
    // A done item keeps who ran it; a running one names who runs it.
    [item.state === "done" ? "ran by" : "claimed by", item.claimedBy ?? "-"],
    ["lease until", time(item.leaseUntil)],
    ["updated", time(item.updatedAt)],
    ["trace", item.traceContext ?? "-"],
    ["payload", block(JSON.stringify(item.payload, null, 2), pad)],
    ["last error", item.lastError === null ? "-" : block(item.lastError, pad)],
    ["result", item.result === null ? "-" : block(JSON.stringify(item.result, null, 2), pad)]
  ]
  const lines = fields.map(([label, text]) => `${label.padEnd(pad.length - 2)}  ${text}`)
  lines.push("", item.errors.length === 0 ? "no attempt errors" : `attempt errors (${item.errors.length}, oldest first):`)
  for (const e of item.errors) {
    lines.push(`  attempt ${e.attempt}  ${isoSeconds(e.at)}  ${e.worker ?? "(worker unknown)"}`, `    ${block(e.error, "    ")}`)
  }
  return lines.join("\n")
}

/** The `show` command. */
export const show = Command.make("show", { database: databaseOption, id: idArg, json: jsonOption }, ({ database, id, json }) =>
  withExistingRepo(database, (repo) => repo.get(id)).pipe(
    Effect.flatMap((found) =>
      Option.match(found, {
        onNone: () => Effect.fail(new CommandFailed({ reason: `no item ${id} (never enqueued, or finished and pruned)` })),
        onSome: (item) => Console.log(json ? JSON.stringify(item) : itemText(item))
      })
    )
  )).pipe(
    Command.withDescription(
      "Shows one item: every field, its attempts' errors (the last 20: attempt, time, worker, error) and " +
        "its result (what its handler returned, for a done item)."
    )
  )
