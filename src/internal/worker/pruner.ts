/**
 * The pruner: deletes finished items whose retention has passed
 * (`QueueRepo.prune`, the repository's retention), in every pool.
 *
 * A pass runs soon after the pool starts (within the first interval, at most
 * 10 s: a restart loop still prunes), then every interval with ±10% jitter
 * (pools started together spread out). A pass repeats the prune while a
 * batch comes back full (1,000 rows of a state), at most MAX_ROUNDS times, and
 * yields to the event loop between statements; a pass that ends on a full
 * batch is followed by the next one a second later (BACKLOG_PAUSE_MS): a
 * backlog of a million done rows is worked off in short statements with
 * pauses, not one long burst of writes, and not at a minute's pace. Two
 * pools pruning at once never take the same row (PostgreSQL: SKIP LOCKED;
 * SQLite: one writer). A failed prune is logged; the next pass tries again.
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type * as QueueRepo from "../../QueueRepo.js"
import { yieldToEventLoop } from "../eventLoop.js"
import { PRUNE_BATCH } from "../store/history.js"
import { type Budget, forkDetached, interruptWithin } from "./bounded.js"
import type { Publisher } from "./events.js"
import type { Part } from "./part.js"
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

/**
 * After a pass that ended on a full batch (a backlog is left), the next pass
 * comes this soon instead of an interval later. Without it a pool would prune
 * at most MAX_ROUNDS batches a minute (about 170 rows a second of a state),
 * far below what it completes (tens of thousands a second): kept rows would
 * pile up past their retention for ever. With it a pool prunes a backlog at
 * about MAX_ROUNDS batches a second, in short statements with pauses between.
 */
export const BACKLOG_PAUSE_MS = 1000

// One pass, and whether it stopped on a full batch.
const passOver = (deps: PrunerDeps): Effect.Effect<{ readonly total: number; readonly backlog: boolean }> =>
  Effect.gen(function*() {
    let total = 0
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const result = yield* deps.repo.prune
      const n = result.done + result.cancelled + result.dead
      total += n
      deps.counts.pruned += n
      const full = result.done >= PRUNE_BATCH || result.cancelled >= PRUNE_BATCH || result.dead >= PRUNE_BATCH
      if (!full) return { total, backlog: false }
      yield* yieldToEventLoop
    }
    return { total, backlog: true }
  }).pipe(
    Effect.tap(({ total }) => (total > 0 ? Effect.logDebug(`docket: pruned ${total} finished items`) : Effect.void)),
    Effect.catchAll((error) => Effect.as(deps.publisher.storageFailed("prune")(error), { total: 0, backlog: false }))
  )

/** One pass: prunes while a batch comes back full, at most MAX_ROUNDS times; how many it deleted. */
export const pass = (deps: PrunerDeps): Effect.Effect<number> => Effect.map(passOver(deps), ({ total }) => total)

const jittered = (ms: number) => Math.round(ms * (0.9 + 0.2 * Math.random()))

/** Runs passes until interrupted (the pool's scope closing): an interval apart, or a pause apart while a backlog lasts. */
export const run = (deps: PrunerDeps): Effect.Effect<never> =>
  Effect.sleep(Math.round(Math.random() * Math.min(deps.intervalMs, 10_000))).pipe(
    Effect.zipRight(Effect.forever(Effect.flatMap(passOver(deps), ({ backlog }) =>
      Effect.sleep(backlog ? Math.min(BACKLOG_PAUSE_MS, deps.intervalMs) : jittered(deps.intervalMs)))))
  )

/** What the pruner part needs: `intervalMs` null when this pool never prunes. */
export type PrunerPartDeps = Omit<PrunerDeps, "intervalMs"> & { readonly intervalMs: number | null }

/**
 * The pruner as a part: `run` forked at start (every pool prunes: no leader
 * to elect, and concurrent pruners never take the same row), interrupted at
 * stop (a pass cut off loses nothing: the next pass, here or elsewhere, goes on).
 */
export class Pruner implements Part {
  readonly name = "pruner"
  private fiber: Fiber.RuntimeFiber<never> | undefined

  /** Built by `make`. */
  constructor(private readonly deps: PrunerPartDeps) {}

  /** Forks `run` in `scope`, unless this pool never prunes. */
  start(scope: Scope.Scope): Effect.Effect<void> {
    const { intervalMs } = this.deps
    if (intervalMs === null) return Effect.void
    return Effect.map(forkDetached(run({ ...this.deps, intervalMs }), scope), (fiber) => {
      this.fiber = fiber
    })
  }

  /** Stops pruning (within what is left of `budget`). */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => (this.fiber === undefined ? Effect.void : interruptWithin(this.fiber, budget.left)))
  }
}

/** The pruner part. */
export const make = (deps: PrunerPartDeps): Effect.Effect<Pruner> => Effect.sync(() => new Pruner(deps))
