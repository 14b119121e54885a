/**
 * Runs an `enqueue` or `stats` command line hotArgv.ts read by hand
 * (hotRun.ts: reported as run.ts reports, no @effect/cli loaded). Bundled
 * with what it imports into dist/hot/ (scripts/bundleHot.mjs).
 */
import type * as Effect from "effect/Effect"
import { runEnqueue } from "./commands/enqueueRun.js"
import { runStats } from "./commands/statsRun.js"
import type { HotCommand } from "./hotArgv.js"
import { runToExitCode } from "./hotRun.js"

/** The line's command: `enqueue` or `stats` (a worker runs from hotWorker.ts, never from the bundle). */
export type HotQuery = Extract<HotCommand, { readonly command: "enqueue" | "stats" }>

const commandOf = (hot: HotQuery): Effect.Effect<void, unknown> =>
  hot.command === "enqueue" ? runEnqueue(hot.args) : runStats(hot.args)

/** Runs the command to the process's exit. */
export const runHot = (hot: HotQuery): void => runToExitCode(commandOf(hot), hot.level)
