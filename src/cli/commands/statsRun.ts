/**
 * `docket stats`: the queue's counts, in total and by kind, as a table or
 * JSON, the waiting kinds no live worker pool claims (their items wait
 * until one starts), and on PostgreSQL who holds back the database's xmin
 * horizon past --horizon-age / --horizon-transactions (vacuum cannot clean
 * up after the queue meanwhile: docs/operations.md). What it does with its
 * parsed arguments, without @effect/cli: stats.ts gives it what @effect/cli
 * parsed, hotArgv.ts what it parsed by hand.
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Horizon from "../../internal/horizon.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { compareText, pad, padLeft } from "../format.js"
import { type DatabaseArgs, horizonThreshold } from "../values.js"
import { withExistingRepo } from "../queue.js"

/** One row of the table: the kind column `width` wide, then due, scheduled, running, done, dead and cancelled. */
const row = (width: number, kind: string, ...counts: [string, string, string, string, string, string]) => {
  const [due, scheduled, running, done, dead, cancelled] = counts
  return `${pad(kind, width)}  ${padLeft(due, 8)}  ${padLeft(scheduled, 9)}  ${padLeft(running, 8)}  ${padLeft(done, 8)}  ${
    padLeft(dead, 8)
  }  ${padLeft(cancelled, 9)}`
}

/** The stats as a text table: one row per kind and a total. */
export const statsTable = (stats: QueueRepo.Stats): string => {
  const rows: Array<[string, QueueRepo.Counts]> = [...Object.entries(stats.byKind)].sort(([a], [b]) => compareText(a, b))
  rows.push(["total", stats])
  const width = Math.max(4, ...rows.map(([k]) => k.length))
  const head = row(width, "kind", "due", "scheduled", "running", "done", "dead", "cancelled")
  const lines = rows.map(([kind, c]) =>
    row(width, kind, String(c.due), String(c.scheduled), String(c.running), String(c.done), String(c.dead), String(c.cancelled))
  )
  return [head, ...lines].join("\n")
}

/**
 * The kinds with waiting items (due or scheduled) that no live pool claims,
 * in order. A live pool registered with every kind (kinds null) claims them
 * all; a gone pool claims nothing (it stopped heartbeating).
 */
export const unhandledKinds = (stats: QueueRepo.Stats, workers: ReadonlyArray<QueueRepo.WorkerInfo>): Array<string> => {
  const live = workers.filter((w) => w.status === "live")
  if (live.some((w) => w.kinds === null)) return []
  const handled = new Set(live.flatMap((w) => w.kinds ?? []))
  return Object.entries(stats.byKind)
    .filter(([kind, c]) => c.due + c.scheduled > 0 && !handled.has(kind))
    .map(([kind]) => kind)
    .sort(compareText)
}

/** The line under the table naming each unhandled kind and its waiting items; none when every waiting kind is claimed. */
const unhandledLine = (stats: QueueRepo.Stats, kinds: ReadonlyArray<string>): string | undefined =>
  kinds.length === 0 ? undefined : `no live worker handles: ${
    kinds.map((k) => `${k} (${stats.byKind[k].due + stats.byKind[k].scheduled} waiting)`).join(", ")
  }`

/** The lines under the table naming who holds the horizon back, one per holder; none when nothing does. */
export const horizonLines = (report: Option.Option<QueueRepo.HorizonReport>): ReadonlyArray<string> =>
  Option.match(Option.filter(report, (r) => r.holders.length > 0), {
    onNone: () => [],
    onSome: (r) => [
      `xmin horizon held back past ${Horizon.describeThreshold(r)} (vacuum cannot clean up after the queue: ` +
      `docs/operations.md) by:`,
      ...r.holders.map((h) => `  ${Horizon.describeHolder(h)}`)
    ]
  })

/** What `docket stats` is given. */
export interface StatsArgs {
  readonly database: DatabaseArgs
  readonly json: boolean
  readonly horizonAge: number
  readonly horizonTransactions: number
}

/** Runs `docket stats` (a SQLite file that does not exist is refused, not made). */
export const runStats = (args: StatsArgs) =>
  withExistingRepo(
    args.database,
    (repo) => Effect.all([repo.stats, repo.listWorkers(), repo.horizon(horizonThreshold(args))])
  ).pipe(
    Effect.flatMap(([s, workers, horizon]) => {
      const unhandled = unhandledKinds(s, workers)
      if (args.json) {
        return Console.log(JSON.stringify({
          due: s.due,
          scheduled: s.scheduled,
          running: s.running,
          done: s.done,
          dead: s.dead,
          cancelled: s.cancelled,
          byKind: s.byKind,
          unhandledKinds: unhandled,
          // null on SQLite (no horizon); on PostgreSQL the threshold and the holders past it (none: []).
          horizon: Option.getOrNull(horizon)
        }))
      }
      const line = unhandledLine(s, unhandled)
      return Console.log([statsTable(s), ...(line === undefined ? [] : [line]), ...horizonLines(horizon)].join("\n"))
    })
  )
