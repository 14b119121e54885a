/**
 * Writing the handlers' declared global limits when a pool starts
 * (`Handler.Options.global`, and the group limits of `perGroup`, which no
 * person's setting overrides yet): each handled kind's declaration, which the
 * storage applies unless a person set the kind's limits. A kind whose handler
 * declares none has limits an earlier declaration left cleared.
 *
 * Written before the pool claims, so its first claim obeys them. If the
 * database cannot take them (it is down), the pool starts all the same and
 * writes them in the background, every 5 s until it can: it must not refuse
 * to run because of a declaration.
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { GlobalLimits, PerGroup } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { type Budget, forkDetached, interruptWithin } from "./bounded.js"
import type { Part } from "./part.js"

/** What the declaration needs from the pool. */
export interface GlobalLimitsDeps {
  readonly repo: QueueRepo.Service
  /** Every handled kind's declaration (the handler table's `globalLimits`). */
  readonly limits: ReadonlyMap<string, GlobalLimits>
  /** Every handled kind's group limits (the handler table's `perGroup`; undefined for none). */
  readonly perGroup?: ReadonlyMap<string, PerGroup | undefined> | undefined
}

/** The declaration as a part: written at start (waited for), retried in the background if it failed. */
export class Declaration implements Part {
  readonly name = "global limits"
  private retry: Fiber.RuntimeFiber<void> | undefined

  /** Built by `make`. */
  constructor(private readonly deps: GlobalLimitsDeps) {}

  /** Writes every kind's declaration (see the module doc). */
  start(scope: Scope.Scope): Effect.Effect<void> {
    const { limits, perGroup = new Map<string, PerGroup | undefined>(), repo } = this.deps
    const once = Effect.zipRight(
      Effect.forEach(limits, ([kind, l]) => repo.declareKindLimits(kind, l), { discard: true }),
      Effect.forEach(perGroup, ([kind, g]) => repo.declarePerGroup(kind, g), { discard: true })
    )
    return once.pipe(
      Effect.catchAll((error) =>
        Effect.zipRight(
          Effect.logWarning(`docket: cannot write the handlers' global limits (${error.message}); retrying every 5 s`),
          Effect.map(forkDetached(Effect.ignore(Effect.retry(once, Schedule.spaced("5 seconds"))), scope), (fiber) => {
            this.retry = fiber
          })
        )
      ),
      Effect.asVoid
    )
  }

  /** Stops a retry still going (within what is left of `budget`). */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => (this.retry === undefined ? Effect.void : interruptWithin(this.retry, budget.left)))
  }
}

/** The declaration part. */
export const make = (deps: GlobalLimitsDeps): Effect.Effect<Declaration> => Effect.sync(() => new Declaration(deps))
