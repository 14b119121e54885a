import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Random, Schedule } from "effect"
import { Backoff } from "../src/index.js"

/** Pure backoff: tested with a fixed random source. */
const backoffDelays = (policy: Backoff.Policy, random: number, attempts: number) =>
  Array.from({ length: attempts }, (_, i) => Duration.toMillis(policy(i + 1, random)))

describe("backoff", () => {
  it("the default is the reference's schedule, 30 s doubling to 1 h, with equal jitter", () => {
    // random = 1 (the top of the range) gives the reference's exact delays.
    expect(backoffDelays(Backoff.defaultPolicy, 0.9999999, 9).map((ms) => Math.round(ms / 1000))).toEqual([
      30, 60, 120, 240, 480, 960, 1920, 3600, 3600
    ])
    // random = 0 gives half of each: never less than half, so retries stay spread.
    expect(backoffDelays(Backoff.defaultPolicy, 0, 3)).toEqual([15_000, 30_000, 60_000])
    expect(backoffDelays(Backoff.defaultPolicy, 0.5, 1)).toEqual([22_500])
  })

  it("jitter spreads a burst of failures over the range", () => {
    const randoms = [0, 0.25, 0.5, 0.75, 0.99]
    const delays = randoms.map((r) => Duration.toMillis(Backoff.defaultPolicy(1, r)))
    expect(new Set(delays).size).toBe(randoms.length)
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(15_000)
      expect(d).toBeLessThan(30_000)
    }
  })

  it("exponential options: base, factor, max, no jitter", () => {
    const policy = Backoff.exponential({ base: "1 second", factor: 3, max: "10 seconds", jitter: 0 })
    expect(backoffDelays(policy, 0.7, 4)).toEqual([1000, 3000, 9000, 10_000])
  })

  it.effect("a Schedule's n-th delay is used for the n-th failure", () =>
    Effect.gen(function*() {
      const schedule = Schedule.exponential("100 millis", 2)
      const delays = yield* Effect.forEach([1, 2, 3], (n) => Backoff.delayFor(schedule, n))
      expect(delays.map(Duration.toMillis)).toEqual([100, 200, 400])
    }))

  it.effect("a policy draws its random number from Effect's Random service", () =>
    Effect.gen(function*() {
      const d = yield* Backoff.delayFor(Backoff.defaultPolicy, 1).pipe(Effect.withRandom(Random.make("fixed-seed")))
      const again = yield* Backoff.delayFor(Backoff.defaultPolicy, 1).pipe(Effect.withRandom(Random.make("fixed-seed")))
      expect(Duration.toMillis(d)).toBe(Duration.toMillis(again))
      expect(Duration.toMillis(d)).toBeGreaterThanOrEqual(15_000)
    }))
})
