/**
 * `docket demo` (what `npm start` runs): a worker over the example task files
 * on a fresh SQLite file, a mixed batch, the live status line and a summary
 * (demoRun.ts, loaded when the command runs: the pool and the task files'
 * loader are not loaded for the other commands).
 */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import { optionalText } from "../options.js"

/** The `demo` command (what `npm start` runs). */
export const demoCommand = Command.make("demo", {
  database: optionalText("database", "url", "A database for the demo. Default: a new SQLite file in a temporary folder.")
}, ({ database }) => Effect.flatMap(Effect.promise(() => import("./demoRun.js")), (m) => m.runDemo(database))).pipe(
  Command.withDescription(
    "Runs a worker over the example task files on a fresh SQLite file with a mixed batch, shows its progress, " +
      "and stops when the work is done (what npm start runs)."
  )
)
