/**
 * The event-loop stall watch. A handler that does synchronous work (a CPU
 * loop, a synchronous library call) blocks the whole process: no lease is
 * renewed meanwhile, and once the lease runs out another worker runs the
 * item again, while this one's late outcome is refused. Nothing else in the
 * log says why: the renewals simply came late.
 *
 * A timer fires every tenth of the lease (from 50 ms to 1 s) and measures how
 * late it fired. A stall of half the lease or more, while this pool held items
 * (running, or with an outcome not yet written), is logged once, as a
 * warning that says what happened and what to do.
 */
import * as Effect from "effect/Effect"

/** What the watch needs from the pool. */
export interface StallDeps {
  readonly leaseMs: number
  /** How many items this pool holds leases for now. */
  readonly held: () => number
  /** Time source (ms, monotonic): performance.now by default. */
  readonly now?: (() => number) | undefined
}

/** How often the watch's timer fires: a tenth of the lease, from 50 ms to 1 s. */
export const intervalMs = (leaseMs: number): number => Math.min(1000, Math.max(50, Math.floor(leaseMs / 10)))

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

const ADVICE = "a handler doing synchronous CPU work should run it in a worker thread (or yield to the event loop), " +
  "or raise the lease (the pool's `lease`, `docket worker --lease`)"

/** The warning for a stall of `blockedMs`, or undefined when it is too short to matter or nothing was held. */
export const describeStall = (blockedMs: number, leaseMs: number, held: number): string | undefined => {
  if (held === 0 || blockedMs < leaseMs / 2) return undefined
  const one = held === 1
  const leases = one ? "the lease of the item this worker held" : `the leases of the ${held} items this worker held`
  return blockedMs >= leaseMs
    ? `docket: the event loop was blocked for ${seconds(blockedMs)} (longer than the lease, ${seconds(leaseMs)}): ` +
      `${leases} ran out, so ${one ? "it" : "they"} may run again elsewhere, and ${one ? "its outcome" : "their outcomes"} ` +
      `here will be refused; ${ADVICE}`
    : `docket: the event loop was blocked for ${seconds(blockedMs)} (over half the lease, ${seconds(leaseMs)}): ` +
      `${leases} came close to running out before ${one ? "its" : "their"} renewal; ${ADVICE}`
}

/** Watches the event loop for ever (interrupt it to stop). */
export const watch = (deps: StallDeps): Effect.Effect<never> =>
  Effect.suspend(() => {
    const now = deps.now ?? (() => performance.now())
    const every = intervalMs(deps.leaseMs)
    let last = now()
    // Held at the last tick, before a stall began (a renewal that ran first may have dropped them since).
    let heldBefore = 0
    const tick = Effect.suspend(() => {
      const t = now()
      const blocked = t - last - every
      last = t
      const held = deps.held()
      const message = describeStall(blocked, deps.leaseMs, Math.max(held, heldBefore))
      heldBefore = held
      return message === undefined ? Effect.void : Effect.logWarning(message)
    })
    return Effect.forever(Effect.zipRight(Effect.sleep(every), tick))
  })
