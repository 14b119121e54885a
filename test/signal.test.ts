import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Signal } from "../src/internal/signal.js"

// Forks a wait of `ms`, checks it is still waiting after `quietMs`, then wakes it.
const stillWaitingUntilNotified = (signal: Signal, ms: number, quietMs: number) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(signal.wait(ms))
    yield* Effect.sleep(quietMs)
    expect(fiber.unsafePoll()).toBeNull()
    signal.notify()
    yield* Fiber.join(fiber)
  })

// The claimer's wake-up (src/internal/signal.ts), with real timers.
describe("Signal", () => {
  it.live("a notify resumes the waiter long before its timeout", () =>
    Effect.gen(function*() {
      const signal = new Signal()
      const t0 = performance.now()
      yield* stillWaitingUntilNotified(signal, 60_000, 20)
      expect(performance.now() - t0).toBeLessThan(30_000)
    }))

  it.live("a notify while nobody waits is remembered once: the next wait returns at once, the one after waits", () =>
    Effect.gen(function*() {
      const signal = new Signal()
      signal.notify()
      signal.notify()
      yield* signal.wait(60_000) // would hang the test if the notify were lost
      yield* stillWaitingUntilNotified(signal, 60_000, 30)
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
      for (const ms of [Number.POSITIVE_INFINITY, 30 * 24 * 3600 * 1000]) yield* stillWaitingUntilNotified(signal, ms, 50)
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
