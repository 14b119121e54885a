/**
 * `docket enqueue`: one item from the arguments, or (with `--from`) the items
 * of an NDJSON file; what it does is in enqueueRun.ts.
 */
import * as Command from "@effect/cli/Command"
import { enqueueConfig } from "./enqueueOptions.js"
import { runEnqueue } from "./enqueueRun.js"

/** The `enqueue` command: prints the new item's id, or what became of the waiting item that held its key. */
export const enqueue = Command.make("enqueue", enqueueConfig, runEnqueue).pipe(
  Command.withDescription(
    "Adds an item: prints its id, or says an item with the same kind and key was already waiting " +
      "(kept, or replaced: --on-conflict). " +
      "With --from, adds the items of an NDJSON file in batches."
  )
)
