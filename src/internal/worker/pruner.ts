/**
 * The pruner: deletes finished items whose retention has passed
 * (`QueueRepo.prune`, the repository's retention), in every pool.
 *
 * A pass runs soon after the pool starts (within the first interval, at most
 * 10 s: a restart loop still prunes), then every interval with ±10% jitter
 * (pools started together spread out). A pass repeats the prune while a
 * batch comes back full (1,000 rows of a state), at most MAX_ROUNDS times, and
 * yields to the event loop between statements: a backlog of a million done
 * rows is worked off over passes instead of one long burst of writes. Two
 * pools pruning at once never take the same row (PostgreSQL: SKIP LOCKED;
 * SQLite: one writer). A failed prune is logged; the next pass tries again.
 */
import { Effect } from "effect"
import type * as QueueRepo from "../../QueueRepo.js"
import { yieldToEventLoop } from "../eventLoop.js"
import { PRUNE_BATCH } from "../store/history.js"
import type { Publisher } from "./events.js"
import type { Tallies } from "./state.js"

/** Statements of each state one pass runs at most (10,000 rows of a state). */
export const MAX_ROUNDS = 10

/** What the pruner needs from the pool. */
export interface PrunerDeps {
  readonly repo: QueueRepo.Service
  readonly intervalMs: number
  readonly counts: Tallies
  readonly publisher: Publisher
}

/** One pass: prunes while a batch comes back full, at most MAX_ROUNDS times; how many it deleted. */
export const pass = (deps: PrunerDeps): Effect.Effect<number> =>
  Effect.gen(function*() {
    let total = 0
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const result = yield* deps.repo.prune
      const n = result.done + result.cancelled + result.dead
      total += n
      deps.counts.pruned += n
      const full = result.done >= PRUNE_BATCH || result.cancelled >= PRUNE_BATCH || result.dead >= PRUNE_BATCH
      if (!full) break
      yield* yieldToEventLoop
    }
    return total
  }).pipe(
    Effect.tap((n) => (n > 0 ? Effect.logDebug(`docket: pruned ${n} finished items`) : Effect.void)),
    Effect.catchAll((error) => Effect.as(deps.publisher.storageFailed("prune")(error), 0))
  )

const jittered = (ms: number) => Math.round(ms * (0.9 + 0.2 * Math.random()))

/** Runs passes until interrupted (the pool's scope closing). */
export const run = (deps: PrunerDeps): Effect.Effect<never> =>
  Effect.sleep(Math.round(Math.random() * Math.min(deps.intervalMs, 10_000))).pipe(
    Effect.zipRight(Effect.forever(Effect.zipRight(pass(deps), Effect.suspend(() => Effect.sleep(jittered(deps.intervalMs))))))
  )
