/**
 * The horizon watch: on PostgreSQL, once a period (a minute by default), who
 * holds back the xmin horizon of the queue's database past the threshold
 * (`QueueRepo.horizon`: a session's transaction open 5 minutes, a slot's or
 * a standby's xmin 100,000 transactions old, a prepared transaction 5
 * minutes old). While it is held, one warning per period names every holder
 * (pid, application, user, state, transaction age and query; slot, type,
 * active, xmin and catalog_xmin and their age; gid, owner, prepared time),
 * so an operator can end it; when it ends, one line says so. Nothing on
 * SQLite, which has no horizon (docs/concepts.md says what it has instead).
 *
 * Every pool watches (no leader to elect, as the pruner): a statement over
 * three small system views a minute per pool costs nothing a queue notices,
 * and each pool's log says it. A failed read is logged as a storage error
 * (rate-limited, events.ts) and tried again at the next period.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { HorizonReport } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"
import * as Horizon from "../horizon.js"
import { type Budget, forkDetached, interruptWithin } from "./bounded.js"
import type { Publisher } from "./events.js"
import type { WatchConfig } from "./config.js"
import type { Part } from "./part.js"

/** What the watch needs from the pool: `config` null when this pool does not watch. */
export interface HorizonDeps {
  readonly repo: QueueRepo.Service
  readonly config: WatchConfig | null
  readonly publisher: Publisher
}

/** Where the docs say what to do. */
const SEE = "docs/operations.md, \"The xmin horizon held back\""

/** The warning while `report` has holders. */
export const heldLine = (report: HorizonReport): string =>
  `docket: the xmin horizon of the queue's database is held back past ${Horizon.describeThreshold(report)} by ` +
  `${Horizon.describeHolders(report)}; vacuum cannot remove the rows the queue updates or deletes meanwhile, ` +
  `and claims slow down as they pile up (${SEE})`

/** The line when the hold seen since `sinceMs` by `names` ended at `nowMs`. */
export const endedLine = (config: Horizon.Resolved, names: ReadonlyArray<string>, sinceMs: number, nowMs: number): string =>
  `docket: the xmin horizon of the queue's database is no longer held back past ${Horizon.describeThreshold(config)} ` +
  `(seen held for ${Horizon.span(nowMs - sinceMs)}, by ${names.join(", ")})`

/** The watch as a part: one fiber checking once a period, forked at start, interrupted at stop. */
export class HorizonWatch implements Part {
  readonly name = "horizon watch"
  private fiber: Fiber.RuntimeFiber<never> | undefined
  /** The hold seen at the last check: since when (this pool's clock), and every holder seen since. */
  private held: { readonly since: number; readonly names: Set<string> } | undefined

  /** Built by `make`. */
  constructor(private readonly deps: HorizonDeps) {}

  /** One check: the holders read, the warning or the end logged. */
  check(config: WatchConfig): Effect.Effect<void> {
    return this.deps.repo.horizon({ age: config.ageMs, transactions: config.transactions }).pipe(
      Effect.flatMap((report) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          this.note(Option.filter(report, (r) => r.holders.length > 0), config, now))
      ),
      Effect.catchAll(this.deps.publisher.storageFailed("horizon"))
    )
  }

  // A hold is warned of at every check; its end once.
  private note(report: Option.Option<HorizonReport>, config: WatchConfig, now: number): Effect.Effect<void> {
    const held = this.held
    if (Option.isSome(report)) {
      const names = held?.names ?? new Set<string>()
      for (const h of report.value.holders) names.add(Horizon.holderName(h))
      if (held === undefined) this.held = { since: now, names }
      return Effect.logWarning(heldLine(report.value))
    }
    if (held === undefined) return Effect.void
    this.held = undefined
    return Effect.logWarning(endedLine(config, [...held.names], held.since, now))
  }

  /** Forks the checks (the first at once), unless this pool does not watch or its database has no horizon. */
  start(scope: Scope.Scope): Effect.Effect<void> {
    const { config, repo } = this.deps
    if (config === null || repo.dialect !== "pg") return Effect.void
    const run = Effect.forever(Effect.zipRight(this.check(config), Effect.sleep(config.everyMs)))
    return Effect.map(forkDetached(run, scope), (fiber) => {
      this.fiber = fiber
    })
  }

  /** Stops watching (within what is left of `budget`). */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => (this.fiber === undefined ? Effect.void : interruptWithin(this.fiber, budget.left)))
  }
}

/** The horizon watch part. */
export const make = (deps: HorizonDeps): Effect.Effect<HorizonWatch> => Effect.sync(() => new HorizonWatch(deps))
