/**
 * The pool's row in the live-workers table (docket_workers): registered when
 * the pool starts, renewed by a heartbeat on the database's clock (with the
 * items running now), removed at a graceful stop. A killed pool stops beating:
 * readers show it as gone once its heartbeat is 15 s old, and any other
 * pool's heartbeat removes it after an hour (../liveness.ts).
 *
 * The table only reports: nothing in the pool waits on it. A heartbeat that
 * fails (the database is down) is logged and published like every storage
 * failure, and the next one tries again; it inserts the row again if it was
 * removed meanwhile (the pool looked gone for an hour, or a person deleted it).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import type { WorkerRegistration } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { REMOVE_AFTER_MS } from "../liveness.js"
import { docketVersion } from "../version.js"
import { boundedWait, type Budget, forkDetached, interruptWithin } from "./bounded.js"
import type { Publisher } from "./events.js"
import type { Part } from "./part.js"

/** What the registry needs from the pool. */
export interface RegistryDeps {
  readonly repo: QueueRepo.Service
  readonly registration: WorkerRegistration
  readonly intervalMs: number
  /** Items running in the pool now. */
  readonly running: () => number
  readonly publisher: Publisher
}

/**
 * A pool's id in the table: its worker name and 8 random hex digits. The name
 * alone may repeat (an application may give two pools one name, even in one
 * process); 32 random bits make two pools of one name sharing a row
 * vanishingly unlikely.
 */
export const poolId = (name: string): string => `${name}#${randomBytes(4).toString("hex")}`

/** The registration of a pool of this process named `name`; `kinds` null when it claims every kind. */
export const registration = (
  name: string,
  kinds: ReadonlyArray<string> | null,
  concurrency: number
): WorkerRegistration => ({
  id: poolId(name),
  name,
  host: hostname(),
  pid: process.pid,
  kinds: kinds === null ? null : [...kinds].sort(),
  concurrency,
  version: docketVersion()
})

/** How long a graceful stop waits to remove the row (the database may be down: the row then shows as gone). */
const REMOVE_WAIT_MS = 5_000

/** The registry part. */
export const make = (deps: RegistryDeps): Effect.Effect<Registry> => Effect.sync(() => new Registry(deps))

/**
 * Registers the pool, heartbeats, and removes its row; see the module doc.
 * Stopped once the outcomes are written: until then the pool still holds work.
 */
export class Registry implements Part {
  readonly name = "registry"
  /** The row's start time, once a heartbeat has returned it (kept if the row must be inserted again). */
  private startedAt: number | undefined
  private removed = false
  private fiber: Fiber.RuntimeFiber<never> | undefined
  // A heartbeat and the removal never overlap: a heartbeat in flight at the
  // stop ends before the row is removed, so it cannot bring the row back.
  private readonly lock = Effect.unsafeMakeSemaphore(1)

  /** Built by `make`. */
  constructor(private readonly deps: RegistryDeps) {}

  /** The pool's id in the table. */
  get id(): string {
    return this.deps.registration.id
  }

  /** One heartbeat, then the rows of pools silent for an hour removed (any live pool clears them). Never fails. */
  readonly beat: Effect.Effect<void> = Effect.suspend(() =>
    this.lock.withPermits(1)(Effect.suspend(() => {
      if (this.removed) return Effect.void
      const { publisher, registration, repo, running } = this.deps
      return repo.heartbeatWorker({ ...registration, running: running(), startedAt: this.startedAt }).pipe(
        Effect.flatMap((startedAt) => {
          this.startedAt = startedAt
          return Effect.catchAll(
            Effect.asVoid(repo.pruneWorkers(Duration.millis(REMOVE_AFTER_MS))),
            publisher.storageFailed("remove silent workers")
          )
        }),
        Effect.catchAll(publisher.storageFailed("heartbeat"))
      )
    }))
  )

  /**
   * Registers the pool (the first heartbeat, waited for: the row is there
   * once the pool has started), then heartbeats every interval in `scope`.
   */
  start(scope: Scope.Scope): Effect.Effect<void> {
    const loop = Effect.forever(Effect.zipRight(Effect.sleep(Duration.millis(this.deps.intervalMs)), this.beat))
    return Effect.zipRight(this.beat, forkDetached(loop, scope)).pipe(
      Effect.map((fiber) => {
        this.fiber = fiber
      })
    )
  }

  /**
   * Removes the row (after the heartbeat in flight, within 5 s and what is
   * left of `budget`) and stops heartbeating (the heartbeat in flight is
   * interrupted in the background). Never fails.
   */
  stop(budget: Budget): Effect.Effect<void> {
    return Effect.suspend(() => {
      const { publisher, registration, repo } = this.deps
      const remove = this.lock.withPermits(1)(Effect.suspend(() => {
        this.removed = true
        return Effect.catchAll(Effect.asVoid(repo.removeWorker(registration.id)), publisher.storageFailed("remove worker"))
      }))
      const waitMs = Math.min(REMOVE_WAIT_MS, budget.left)
      return boundedWait(remove, waitMs).pipe(
        Effect.flatMap((done) =>
          Option.isSome(done) ? Effect.void : Effect.logWarning(
            `docket: the live-workers row of ${registration.id} was not removed within ${Math.round(waitMs)} ms; ` +
              "it shows as gone until another pool removes it"
          )
        ),
        Effect.zipRight(this.fiber === undefined ? Effect.void : interruptWithin(this.fiber, 1000))
      )
    })
  }
}
