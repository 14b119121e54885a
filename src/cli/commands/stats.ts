/**
 * `docket stats`: the queue's counts; what it does is in statsRun.ts.
 */
import * as Command from "@effect/cli/Command"
import { databaseOption, horizonOptions, jsonOption } from "../options.js"
import { runStats } from "./statsRun.js"

/** The `stats` command (a SQLite file that does not exist is refused, not made). */
export const stats = Command.make("stats", { database: databaseOption, json: jsonOption, ...horizonOptions }, runStats).pipe(
  Command.withDescription(
    "Counts items: due (waiting, due now), scheduled (waiting, due later), running (leased), done (kept " +
      "for the retention), dead and cancelled, in total and by kind; names the waiting kinds no live " +
      "worker handles; and, on PostgreSQL, who holds vacuum back past --horizon-age or --horizon-transactions."
  )
)
