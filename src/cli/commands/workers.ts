/**
 * `docket workers`: the worker pools registered in the queue's database, live
 * and gone (silent for longer than the gone age: killed or cut off), as a
 * table or JSON. A SQLite file that does not exist is refused, not made.
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type * as QueueRepo from "../../QueueRepo.js"
import { GONE_AFTER_MS, REMOVE_AFTER_MS } from "../../internal/liveness.js"
import { age, clip, isoSeconds, table } from "../format.js"
import { databaseOption, jsonOption } from "../options.js"
import { withExistingRepo } from "../queue.js"

/** A pool's kinds for the table: "all", or the kinds (clipped: --json has them all). */
const kindsText = (kinds: ReadonlyArray<string> | null): string =>
  kinds === null ? "all" : kinds.length === 0 ? "-" : clip(kinds.join(","), 60)

const HEAD = ["id", "name", "host", "pid", "kinds", "concurrency", "running", "version", "started", "heartbeat", "status"]
// pid, concurrency and running: numbers, aligned right.
const NUMBERS = new Set([3, 5, 6])

/** The pools as a text table, then how many are live and gone; a line saying so when there are none. */
export const workersTable = (workers: ReadonlyArray<QueueRepo.WorkerInfo>): string => {
  if (workers.length === 0) return "no worker pools registered"
  const rows = workers.map((w) => [
    w.id,
    w.name,
    w.host,
    String(w.pid),
    kindsText(w.kinds),
    String(w.concurrency),
    String(w.running),
    w.version,
    isoSeconds(w.startedAt),
    `${age(w.heartbeatAgeMs)} ago`,
    w.status
  ])
  const gone = workers.filter((w) => w.status === "gone").length
  return `${table([HEAD, ...rows], NUMBERS)}\n${workers.length - gone} live, ${gone} gone`
}

/** The `workers` command. */
export const workers = Command.make("workers", { database: databaseOption, json: jsonOption }, ({ database, json }) =>
  withExistingRepo(database, (repo) => repo.listWorkers()).pipe(
    Effect.flatMap((list) => Console.log(json ? JSON.stringify(list) : workersTable(list)))
  )).pipe(
    Command.withDescription(
      "Lists the worker pools registered in the queue's database: id, name, host, pid, kinds, concurrency, " +
        `items running, version, start, last heartbeat and status (gone: no heartbeat for ${GONE_AFTER_MS / 1000}s; ` +
        `removed after ${REMOVE_AFTER_MS / 3_600_000}h).`
    )
  )
