/**
 * A wake-up for one waiting fiber, remembered when nobody waits (like a
 * sliding queue of one), with a timeout.
 *
 * The pool's claimer used to wait on `Queue.take(sliding(1))` raced with a
 * timeout (`Effect.timeoutOption`): after idle, a notification took 0.41-0.45
 * ms to resume the claimer (the race forks a sleeper and interrupts it), a
 * fifth of the pickup after the enqueue returned. Here the waiter is resumed
 * directly and its timer cleared.
 */
import * as Effect from "effect/Effect"

// Node fires a timer whose delay exceeds a signed 32-bit millisecond count
// (about 24.8 days, or Infinity: a `poll` of Duration.infinity) after 1 ms.
// Longer waits are cut to this; waking early only costs a look for due items.
const MAX_TIMER_MS = 2 ** 31 - 1

/** See the module doc. */
export class Signal {
  private remembered = false
  private waiter: (() => void) | undefined

  /** Wakes the waiter, or the next `wait` if none waits. Safe from any callback. */
  readonly notify = (): void => {
    const waiter = this.waiter
    if (waiter === undefined) {
      this.remembered = true
      return
    }
    this.waiter = undefined
    waiter()
  }

  /** A notify came that no wait has taken yet: the next `wait` returns at once. */
  readonly pending = (): boolean => this.remembered

  /**
   * Returns at the next `notify` (at once if one came since the last wait), or
   * after `ms` (at most about 24.8 days). One waiter at a time. A notify that
   * lands while the wait is being interrupted may be spent on it.
   */
  wait(ms: number): Effect.Effect<void> {
    return Effect.async<void>((resume) => {
      if (this.remembered) {
        this.remembered = false
        resume(Effect.void)
        return
      }
      if (this.waiter !== undefined) throw new Error("Signal: one waiter at a time")
      const timer = setTimeout(() => {
        this.waiter = undefined
        resume(Effect.void)
      }, Math.min(MAX_TIMER_MS, Math.max(1, ms)))
      this.waiter = () => {
        clearTimeout(timer)
        resume(Effect.void)
      }
      return Effect.sync(() => {
        clearTimeout(timer)
        this.waiter = undefined
      })
    })
  }
}
