/**
 * Helpers of the runtime suite (test/worker/runtime/): a backoff fast enough
 * for retries to run within a test, and an item read back by id.
 */
import { Backoff, QueueRepo } from "../../src/index.js"
import { Effect, Option } from "effect"

export const fast = Backoff.constant("20 millis")

/** The item, or undefined when there is none. */
export const item = (id: number) =>
  Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.get(id)).pipe(Effect.map(Option.getOrUndefined))
