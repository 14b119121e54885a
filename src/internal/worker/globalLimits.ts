/**
 * Writing the handlers' declared global limits when a pool starts
 * (`Handler.Options.global`): each handled kind's declaration, which the
 * storage applies unless a person set the kind's limits. A kind whose handler
 * declares none has limits an earlier declaration left cleared.
 *
 * Written before the pool claims, so its first claim obeys them. If the
 * database cannot take them (it is down), the pool starts all the same and
 * writes them in the background, every 5 s until it can: it must not refuse
 * to run because of a declaration.
 */
import { Effect, Schedule, type Scope } from "effect"
import type { GlobalLimits } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"

/** Writes every kind's declaration (see the module doc). */
export const declare = (
  repo: QueueRepo.Service,
  limits: ReadonlyMap<string, GlobalLimits>
): Effect.Effect<void, never, Scope.Scope> => {
  const once = Effect.forEach(limits, ([kind, l]) => repo.declareKindLimits(kind, l), { discard: true })
  return once.pipe(
    Effect.catchAll((error) =>
      Effect.zipRight(
        Effect.logWarning(`docket: cannot write the handlers' global limits (${error.message}); retrying every 5 s`),
        Effect.forkScoped(Effect.ignore(Effect.retry(once, Schedule.spaced("5 seconds"))))
      )
    ),
    Effect.asVoid
  )
}
