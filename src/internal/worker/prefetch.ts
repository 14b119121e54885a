/**
 * Prefetch sizing: how many items the pool claims beyond its free slots.
 *
 * Adaptive: as many items as this pool starts in about half the hold time
 * (measured over windows of at least 250 ms), between its concurrency and the
 * `prefetch` bound. Fast handlers get large batches (fewer round trips per
 * item); slow ones keep only what they can start soon, leaving the rest to
 * other workers. The pure functions below decide; `Prefetch` keeps the
 * measurement window.
 */

/** The shortest window the start rate is measured over (ms). */
export const WINDOW_MS = 250

/** The prefetch for a measured start rate (items per ms). */
export const fromRate = (ratePerMs: number, holdMs: number, min: number, max: number): number =>
  Math.max(min, Math.min(max, Math.ceil(ratePerMs * holdMs * 0.5)))

/**
 * Slow start: slots ran dry although the last claim was full, so a larger
 * prefetch would have kept them busy; do not wait for the next measurement.
 * Quadrupled (10 -> 8000 in five claims): doubling took ten, a few percent of
 * a 20,000-job drain (W2: 46.7k -> 48-49k jobs/s).
 */
export const grown = (current: number, min: number, max: number): number => Math.min(max, Math.max(min, current * 4))

/** The claimer claims again once the buffer is at or below this (half the prefetch). */
export const lowWater = (prefetch: number): number => Math.floor(prefetch / 2)

/** What `room` weighs. */
export interface RoomInput {
  readonly concurrency: number
  readonly prefetch: number
  /** Prefetching is paused (items had to be released unstarted). */
  readonly paused: boolean
  readonly running: number
  readonly buffered: number
  /** The largest claim a repository accepts. */
  readonly maxClaim: number
}

/** How many items to ask for now: free slots plus the prefetch, less what is held. */
export const room = (input: RoomInput): number =>
  Math.min(
    input.maxClaim,
    input.concurrency + (input.paused ? 0 : input.prefetch) - input.running - input.buffered
  )

/**
 * Whether to claim now: there is room, and either slots are starving or the
 * buffer ran down to its low water.
 */
export const shouldClaim = (roomNow: number, starving: boolean, buffered: number, prefetch: number): boolean =>
  roomNow > 0 && (starving || buffered <= lowWater(prefetch))

/** The adaptive prefetch of one pool. */
export class Prefetch {
  /** The prefetch in force. */
  current: number
  /**
   * Prefetched items had to be given back because no slot freed in time:
   * prefetching more would only lease items other workers could run. Only
   * free slots are claimed for until a slot frees (`resume`).
   */
  paused = false
  private readonly min: number
  private windowStart: number
  private windowStarts = 0

  constructor(private readonly max: number, concurrency: number, private readonly holdMs: number, now: number) {
    this.min = Math.min(max, concurrency)
    this.current = this.min
    this.windowStart = now
  }

  /** Measures the start rate since the window began (once it is long enough) and sizes to it. */
  adapt(now: number, starts: number): void {
    const elapsed = now - this.windowStart
    if (elapsed < WINDOW_MS) return
    const rate = (starts - this.windowStarts) / elapsed
    this.windowStart = now
    this.windowStarts = starts
    this.current = fromRate(rate, this.holdMs, this.min, this.max)
  }

  /** Slots starved after a full claim: grow at once. */
  grow(): void {
    this.current = grown(this.current, this.min, this.max)
  }

  /** Prefetched items were given back unstarted. */
  pause(): void {
    this.paused = true
  }

  /** A slot freed. */
  resume(): void {
    this.paused = false
  }

  lowWater(): number {
    return lowWater(this.current)
  }
}
