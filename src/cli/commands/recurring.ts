/**
 * `docket recurring list`: the recurring schedules stored in the queue's
 * database (declared by worker pools, `Worker.Options.recurring` or a task
 * file's `recurring` export), live or stopped, as a table or JSON. A SQLite
 * file that does not exist is refused, not made.
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type * as QueueRepo from "../../QueueRepo.js"
import { GONE_AFTER_MS } from "../../internal/liveness.js"
import { clip, isoSeconds, table } from "../format.js"
import { databaseOption, jsonOption } from "../options.js"
import { withExistingRepo } from "../queue.js"

const HEAD = ["name", "kind", "cron", "tz", "missed", "status", "next tick", "last tick", "last item"]

// A last item no longer stored was pruned after its retention (or deleted).
const lastItem = (s: QueueRepo.ScheduleInfo) =>
  s.lastItem === null ? "-" : `${s.lastItem.id} (${s.lastItem.state ?? "removed"})`

/** The schedules as a text table; a line saying so when there are none. */
export const schedulesTable = (schedules: ReadonlyArray<QueueRepo.ScheduleInfo>): string => {
  if (schedules.length === 0) return "no recurring schedules"
  const rows = schedules.map((s) => [
    s.name,
    s.kind,
    clip(s.cron, 40),
    s.tz ?? "UTC",
    s.missed,
    s.status,
    isoSeconds(s.nextTick),
    s.lastTick === null ? "-" : isoSeconds(s.lastTick),
    lastItem(s)
  ])
  const stopped = schedules.filter((s) => s.status === "stopped").length
  return `${table([HEAD, ...rows])}\n${schedules.length - stopped} live, ${stopped} stopped`
}

const list = Command.make("list", { database: databaseOption, json: jsonOption }, ({ database, json }) =>
  withExistingRepo(database, (repo) => repo.listSchedules).pipe(
    Effect.flatMap((schedules) => Console.log(json ? JSON.stringify(schedules) : schedulesTable(schedules)))
  )).pipe(
    Command.withDescription(
      "Lists the recurring schedules: name, kind, cron, time zone, missed mode, status (stopped: no live " +
        `worker declared it for ${GONE_AFTER_MS / 1000}s; nobody enqueues its ticks), next tick, last tick ` +
        "and its item (id and state)."
    )
  )

/** The `recurring` group on its own (its help text), without its subcommands. */
export const recurringGroup = Command.make("recurring").pipe(
  Command.withDescription("Recurring schedules, declared by worker pools: list them.")
)

/** The subcommands of `recurring`. */
export const recurringCommands = [list] as const

/** The `recurring` command and its subcommands. */
export const recurring = recurringGroup.pipe(Command.withSubcommands(recurringCommands))
