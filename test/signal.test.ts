import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Signal } from "../src/internal/signal.js"

// The claimer's wake-up (src/internal/signal.ts), with real timers.
describe("Signal", () => {
  it.live("a notify resumes the waiter long before its timeout", () =>
    Effect.gen(function*() {
      const signal = new Signal()
      const t0 = performance.now()
      const fiber = yield* Effect.fork(signal.wait(60_000))
      yield* Effect.sleep("20 millis")
      signal.notify()
      yield* Fiber.join(fiber)
      expect(performance.now() - t0).toBeLessThan(30_000)
    }))

  it.live("a notify while nobody waits is remembered once: the next wait returns at once, the one after waits", () =>
    Effect.gen(function*() {
      const signal = new Signal()
      signal.notify()
      signal.notify()
      yield* signal.wait(60_000) // would hang the test if the notify were lost
      const second = yield* Effect.fork(signal.wait(60_000))
      yield* Effect.sleep("30 millis")
      expect(second.unsafePoll()).toBeNull()
      signal.notify()
      yield* Fiber.join(second)
    }))

  it.live("without a notify the wait ends after its time", () =>
    Effect.gen(function*() {
      const signal = new Signal()
      const t0 = performance.now()
      yield* signal.wait(40)
      expect(performance.now() - t0).toBeGreaterThanOrEqual(39)
    }))

  it.live("a wait longer than a Node timer can hold (Infinity, 30 days) does not end early", () =>
    Effect.gen(function*() {
      const signal = new Signal()
      for (const ms of [Number.POSITIVE_INFINITY, 30 * 24 * 3600 * 1000]) {
        const fiber = yield* Effect.fork(signal.wait(ms))
        yield* Effect.sleep("50 millis")
        expect(fiber.unsafePoll()).toBeNull()
        signal.notify()
        yield* Fiber.join(fiber)
      }
    }))

  it.live("an interrupted wait leaves no waiter behind: the next notify is kept for the next wait", () =>
    Effect.gen(function*() {
      const signal = new Signal()
      const fiber = yield* Effect.fork(signal.wait(60_000))
      yield* Effect.sleep("10 millis")
      yield* Fiber.interrupt(fiber)
      signal.notify()
      yield* signal.wait(60_000)
    }))
})
