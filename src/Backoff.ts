/**
 * Backoff: how long a failed item waits before its next attempt. A policy is a
 * pure function of the attempt that failed (1 for the first) and a random
 * number in [0, 1), so it can be tested with a fixed random source; or an
 * Effect `Schedule`, whose n-th delay is used for the n-th failure.
 *
 * The default is the reference's schedule (30 s, doubling, at most 1 hour)
 * with "equal jitter": a delay d becomes a uniform draw from [d/2, d]. Without
 * jitter, every email that failed during a mail-server outage would retry in
 * the same instant; with full jitter ([0, d]) some would retry almost at once.
 */
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

/** A backoff policy: the delay after the `attempt`-th failure, given a random number in [0, 1). */
export type Policy = (attempt: number, random: number) => Duration.Duration

/** Options of `exponential`: the first delay, the growth factor, the cap, and the share of random jitter. */
export interface ExponentialOptions {
  readonly base?: Duration.DurationInput
  readonly factor?: number
  readonly max?: Duration.DurationInput
  /** Fraction of the delay that is random: 0 for none, 0.5 for equal jitter (default), 1 for full. */
  readonly jitter?: number
}

/** base * factor^(attempt-1), at most max, with the given share of it random. */
export const exponential = (options: ExponentialOptions = {}): Policy => {
  const base = Duration.toMillis(Duration.decode(options.base ?? "30 seconds"))
  const factor = options.factor ?? 2
  const max = Duration.toMillis(Duration.decode(options.max ?? "1 hour"))
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0.5))
  return (attempt, random) => {
    const exact = Math.min(max, base * Math.pow(factor, Math.max(0, attempt - 1)))
    return Duration.millis(Math.round(exact * (1 - jitter) + exact * jitter * random))
  }
}

/** The same delay every time. */
export const constant = (delay: Duration.DurationInput): Policy => {
  const d = Duration.decode(delay)
  return () => d
}

/** The reference's schedule with equal jitter: 30 s doubling to 1 h. */
export const defaultPolicy: Policy = exponential()

/** Any of the accepted forms of a backoff. */
export type Backoff = Policy | Schedule.Schedule<unknown, unknown, never>

/** The delay after the `attempt`-th failure. Schedules are stepped `attempt` times. */
export const delayFor = (backoff: Backoff, attempt: number): Effect.Effect<Duration.Duration> =>
  Schedule.isSchedule(backoff)
    ? Effect.map(
      Schedule.run(Schedule.delays(backoff), 0, Chunk.range(1, Math.max(1, attempt))),
      (delays) => Chunk.last(delays).pipe((last) => (last._tag === "Some" ? last.value : Duration.zero))
    )
    : Effect.map(Effect.randomWith((r) => r.next), (random) => backoff(attempt, random))
