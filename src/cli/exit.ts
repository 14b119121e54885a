/**
 * Running the command's main effect to the process's exit: shared by run.ts
 * (@effect/cli's commands) and hot.ts (the commands parsed by hand).
 * SIGINT/SIGTERM interrupt the main fiber (NodeRuntime.runMain), which shuts a
 * running worker down gracefully; the process then exits 0.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import type * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

/** Runs `main` (which succeeds with the exit code) and exits with its code. */
export const runToExit = (main: Effect.Effect<number>): void =>
  NodeRuntime.runMain(main, {
    disableErrorReporting: true,
    disablePrettyLogger: true,
    teardown: (exit) => {
      // Always exit: a finished command must not linger on an open handle.
      process.exit(Exit.isSuccess(exit) ? Number(exit.value) : Cause.isInterruptedOnly(exit.cause) ? 0 : 1)
    }
  })
