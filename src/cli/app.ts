/**
 * The `docket` command: its subcommands, one per file in commands/, and the
 * tree of them that help and the flag checks walk (see help.ts, argv.ts).
 *
 * Database: `--database <url>`, else `DOCKET_DATABASE_URL`, else
 * `./docket.db`. `postgres://` / `postgresql://` is PostgreSQL, anything else a
 * SQLite file path. Exit codes: 0 ok, 1 failure, 2 bad usage or bad input (one
 * line on stderr saying what is wrong; nothing written).
 */
import * as Command from "@effect/cli/Command"
import * as CommandDescriptor from "@effect/cli/CommandDescriptor"
import { cancel } from "./commands/cancel.js"
import { dashboard } from "./commands/dashboard.js"
import { dead, deadCommands, deadGroup } from "./commands/dead.js"
import { demoCommand } from "./commands/demo.js"
import { enqueue } from "./commands/enqueue.js"
import { grants } from "./commands/grants.js"
import { group, groupCommands, groupGroup } from "./commands/group.js"
import { kind, kindCommands, kindGroup } from "./commands/kind.js"
import { list } from "./commands/list.js"
import { migrate } from "./commands/migrate.js"
import { recurring, recurringCommands, recurringGroup } from "./commands/recurring.js"
import { show } from "./commands/show.js"
import { stats } from "./commands/stats.js"
import { worker } from "./commands/worker.js"
import { workers } from "./commands/workers.js"
import { workflow, workflowCommands, workflowGroup } from "./commands/workflow.js"

/** A command and, for a group (`docket`, `docket dead`), its subcommands. */
export interface CommandNode {
  readonly name: string
  /** The command itself, without its subcommands: its options, arguments and description. */
  readonly descriptor: CommandDescriptor.Command<unknown>
  readonly children: ReadonlyArray<CommandNode>
}

const node = (
  command: { readonly descriptor: CommandDescriptor.Command<any> },
  children: ReadonlyArray<CommandNode> = []
): CommandNode => ({
  name: [...CommandDescriptor.getNames(command.descriptor)][0]!,
  descriptor: command.descriptor,
  children
})

const docketGroup = Command.make("docket").pipe(
  Command.withDescription("Docket: a durable work queue and worker runtime (SQLite or PostgreSQL).")
)

/** The commands as a tree, in the order their help lists them. */
export const tree: CommandNode = node(docketGroup, [
  node(migrate),
  node(grants),
  node(enqueue),
  node(worker),
  node(stats),
  node(workers),
  node(list),
  node(show),
  node(deadGroup, deadCommands.map((c) => node(c))),
  node(kindGroup, kindCommands.map((c) => node(c))),
  node(groupGroup, groupCommands.map((c) => node(c))),
  node(recurringGroup, recurringCommands.map((c) => node(c))),
  node(workflowGroup, workflowCommands.map((c) => node(c))),
  node(cancel),
  node(dashboard),
  node(demoCommand)
])

/** The root command: `docket <subcommand>`. */
export const root = docketGroup.pipe(Command.withSubcommands([
  migrate, grants, enqueue, worker, stats, workers, list, show, dead, kind, group, recurring, workflow, cancel, dashboard, demoCommand
]))
