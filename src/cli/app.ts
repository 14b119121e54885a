/**
 * The `docket` command: its subcommands, one per file in commands/ (the
 * `--help` text is generated from their definitions by @effect/cli).
 *
 * Database: `--database <url>`, else `DOCKET_DATABASE_URL`, else
 * `./docket.db`. `postgres://` / `postgresql://` is PostgreSQL, anything else a
 * SQLite file path. Exit codes: 0 ok, 1 failure, 2 bad usage or bad input (one
 * line on stderr saying what is wrong; nothing written).
 */
import { Command } from "@effect/cli"
import { dead } from "./commands/dead.js"
import { demoCommand } from "./commands/demo.js"
import { enqueue } from "./commands/enqueue.js"
import { migrate } from "./commands/migrate.js"
import { stats } from "./commands/stats.js"
import { worker } from "./commands/worker.js"

/** The root command: `docket <subcommand>`. */
export const root = Command.make("docket").pipe(
  Command.withDescription("Docket: a durable work queue and worker runtime (SQLite or PostgreSQL)."),
  Command.withSubcommands([migrate, enqueue, worker, stats, dead, demoCommand])
)
