/**
 * `docket group list`: the groups of a kind (actors: items of one group in
 * order, a kind's `perGroup` limits; docs/concepts.md "Actors: groups of a
 * kind"). A SQLite file that does not exist is refused, not made.
 */
import * as Command from "@effect/cli/Command"
import { groupList } from "./groupList.js"

/** The `group` group on its own (its help text), without its subcommands. */
export const groupGroup = Command.make("group").pipe(
  Command.withDescription("Groups of a kind: items of one customer, endpoint or repository, limited and ordered per group.")
)

/** The subcommands of `group`. */
export const groupCommands = [groupList] as const

/** The `group` command and its subcommands. */
export const group = groupGroup.pipe(Command.withSubcommands(groupCommands))
