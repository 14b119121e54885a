/**
 * Runs a `worker` command line hotArgv.ts read by hand: its options checked
 * as worker.ts checks them (workerOptions.ts), then the pool (workerRun.ts),
 * reported as run.ts reports (hotRun.ts). Never bundled: the worker loads the
 * application's task files, which must share the application's Effect.
 */
import * as Effect from "effect/Effect"
import { workerOptions } from "./commands/workerOptions.js"
import type { HotCommand } from "./hotArgv.js"
import { runToExitCode } from "./hotRun.js"

/** Runs the worker to the process's exit. */
export const runHotWorker = (hot: Extract<HotCommand, { readonly command: "worker" }>): void =>
  runToExitCode(
    Effect.flatMap(
      workerOptions(hot.args),
      (options) => Effect.flatMap(Effect.promise(() => import("./commands/workerRun.js")), (m) => m.runWorker(options))
    ),
    hot.level
  )
