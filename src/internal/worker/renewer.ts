/**
 * The lease renewer: every third of the lease, one fenced statement extends
 * the leases of every running item, and of every item whose handler ended but
 * whose outcome is not written yet (the database is slow or down): otherwise
 * another worker would run them again.
 *
 * A renewal that finds a lease taken by another worker, or an item cancelled
 * (the cancel changed its token), or that cannot reach the database until the
 * lease surely ran out, calls `onLost` for that run: the pool interrupts it
 * and records nothing. The items of refused renewals are read first, so a
 * cancelled one is marked as such (`cancelled`): it is logged and published
 * as a cancel, not as a lost lease.
 */
import { Duration, Effect, Schedule } from "effect"
import type { Claim } from "../../Domain.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { markCancelled } from "./cancels.js"
import type { Publisher } from "./events.js"
import * as Stall from "./stall.js"
import type { Running } from "./state.js"

/** What the renewer needs from the pool. */
export interface RenewerDeps {
  readonly repo: QueueRepo.Service
  readonly leaseMs: number
  /** The runs in progress. */
  readonly running: ReadonlySet<Running>
  /** The claims whose outcomes are not written yet. */
  readonly unrecorded: () => ReadonlyArray<Claim>
  readonly publisher: Publisher
  /** A run whose lease is lost or whose item was cancelled: marked `lost` (and `cancelled`) already; the pool stops it. */
  readonly onLost: (entry: Running) => Effect.Effect<void>
  /** Time source (ms, monotonic): performance.now by default. */
  readonly now?: (() => number) | undefined
}

/** One renewal round. */
export const renewOnce = (deps: RenewerDeps): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { leaseMs, onLost, publisher, repo, running } = deps
    const now = deps.now ?? (() => performance.now())
    const entries = [...running].filter((e) => !e.lost)
    const unrecorded = deps.unrecorded()
    if (entries.length === 0 && unrecorded.length === 0) return Effect.void
    const sent = now()
    const lose = (entry: Running) => {
      entry.lost = true
      return onLost(entry)
    }
    return repo.extendMany([...entries.map((e) => e.claim), ...unrecorded], Duration.millis(leaseMs)).pipe(
      Effect.tap(() => publisher.storageWorked("extend lease")),
      Effect.flatMap((applied) => {
        const refused = entries.filter((entry, i) => {
          if (applied[i]) entry.deadline = sent + leaseMs
          return !applied[i]
        })
        return refused.length === 0 ? Effect.void : Effect.zipRight(
          markCancelled(repo, refused),
          // Still running, and not stopped meanwhile (by a cancel notice).
          Effect.forEach(refused, (entry) => (running.has(entry) && !entry.lost ? lose(entry) : Effect.void), {
            discard: true
          })
        )
      }),
      Effect.catchAll((error) =>
        Effect.zipRight(
          publisher.storageFailed("extend lease")(error),
          // Cannot renew: once a lease has surely run out, another worker may
          // run the item, so this run stops.
          Effect.forEach(entries, (e) => (now() > e.deadline ? lose(e) : Effect.void), { discard: true })
        )
      )
    )
  })

/**
 * Renews every third of the lease (at least every 10 ms), for ever; beside it
 * the stall watch says when the event loop was blocked long enough to lose leases.
 */
export const run = (deps: RenewerDeps): Effect.Effect<never> =>
  Effect.zipRight(
    Effect.fork(Stall.watch({ leaseMs: deps.leaseMs, held: () => deps.running.size + deps.unrecorded().length })),
    Effect.repeat(renewOnce(deps), Schedule.spaced(Duration.millis(Math.max(10, Math.floor(deps.leaseMs / 3))))).pipe(
      Effect.zipRight(Effect.never)
    )
  )
