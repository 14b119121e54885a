/**
 * `docket group list KIND` (./groupList.ts) and `docket group pause | resume
 * KIND GROUP`: one group of a kind (a tenant, an endpoint) as a thing a person
 * operates, obeyed by every worker process on every host (the pause is
 * stored). A SQLite file that does not exist is refused, not made. Each
 * subcommand is a value, listed in `groupCommands`.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { checkGroupName } from "../../internal/store/groups.js"
import { databaseOption } from "../options.js"
import { withExistingRepo } from "../queue.js"
import { groupList } from "./groupList.js"
import { kindArg } from "./kind.js"

// A group as an error quotes it: an over-long one cut, so the line stays one line to read.
const shown = (text: string) => (text.length > 40 ? `${text.slice(0, 40)}...` : text)

/** The group argument, checked while the command line is parsed (exit 2, one line naming `group`). */
export const groupArg = Args.text({ name: "group" }).pipe(
  Args.withDescription("The group inside the kind (1 to 512 characters, as given at enqueue)."),
  Args.mapEffect((text) =>
    Either.match(checkGroupName(text), {
      onLeft: (e) => Effect.fail(HelpDoc.p(`group '${shown(text)}' ${e.reason}`)),
      onRight: Effect.succeed
    })
  )
)

const pause = Command.make("pause", { database: databaseOption, kind: kindArg, group: groupArg }, ({ database, group, kind }) =>
  withExistingRepo(database, (repo) => repo.pauseGroup(kind, group)).pipe(
    Effect.zipRight(Console.log(
      `paused group ${group} of ${kind}: no worker starts its items (running ones finish; enqueues are kept; ` +
        `the kind's other groups go on)`
    ))
  )).pipe(Command.withDescription("Pauses one group of a kind: no worker process starts its items until it is resumed."))

const resume = Command.make("resume", { database: databaseOption, kind: kindArg, group: groupArg }, ({ database, group, kind }) =>
  withExistingRepo(database, (repo) => repo.resumeGroup(kind, group)).pipe(
    Effect.zipRight(Console.log(`resumed group ${group} of ${kind}`))
  )).pipe(Command.withDescription("Resumes a paused group; idle workers start its items at once."))

/** The `group` command on its own (its help text), without its subcommands. */
export const groupGroup = Command.make("group").pipe(
  Command.withDescription("Groups of a kind (an item's --group): list them, pause and resume one of them.")
)

/** The subcommands of `group`. */
export const groupCommands = [groupList, pause, resume] as const

/** The `group` command and its subcommands. */
export const group = groupGroup.pipe(Command.withSubcommands(groupCommands))
