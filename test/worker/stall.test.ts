/**
 * The event-loop stall watch (src/internal/worker/stall.ts), under the
 * TestClock: its timer fires every tenth of the lease; a tick that finds
 * the (fake) monotonic clock moved on by much more than that is a stall,
 * logged once when it reaches half the lease and this pool held items.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Logger, TestClock } from "effect"
import * as Stall from "../../src/internal/worker/stall.js"

describe("the stall watch", () => {
  it.scoped("logs a stall longer than the lease once, saying what happened and what to do", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        lines.push(`${logLevel.label}: ${(Array.isArray(message) ? message : [message]).join(" ")}`)
      })
      let now = 0
      let held = 1
      const leaseMs = 2000
      const every = Stall.intervalMs(leaseMs)
      expect(every).toBe(200)
      const fiber = yield* Effect.fork(Stall.watch({ leaseMs, held: () => held, now: () => now }).pipe(Effect.provide(Logger.add(logger))))
      // On time: nothing.
      for (let i = 0; i < 10; i++) {
        now += every
        yield* TestClock.adjust(every)
      }
      expect(lines).toEqual([])
      // Blocked for 4.1 s: the next tick fires that much late (the items were dropped by a renewal that ran first).
      now += every + 4100
      held = 0
      yield* TestClock.adjust(every)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toBe(
        "WARN: docket: the event loop was blocked for 4.1 s (longer than the lease, 2.0 s): the lease of the item this " +
          "worker held ran out, so it may run again elsewhere, and its outcome here will be refused; a handler doing " +
          "synchronous CPU work should run it in a worker thread (or yield to the event loop), or raise the lease " +
          "(the pool's `lease`, `docket worker --lease`)"
      )
      // Once per stall: on time again, nothing more.
      for (let i = 0; i < 10; i++) {
        now += every
        yield* TestClock.adjust(every)
      }
      expect(lines).toHaveLength(1)
      // A stall with nothing held is not logged.
      now += every + 5000
      yield* TestClock.adjust(every)
      expect(lines).toHaveLength(1)
      yield* Fiber.interrupt(fiber)
    }))

  it("a stall of half the lease warns that leases came close to running out; a shorter one is not logged", () => {
    expect(Stall.describeStall(900, 2000, 3)).toBeUndefined()
    expect(Stall.describeStall(1200, 2000, 3)).toMatch(
      /^docket: the event loop was blocked for 1\.2 s \(over half the lease, 2\.0 s\): the leases of the 3 items this worker held came close/
    )
    expect(Stall.describeStall(30_000, 2000, 0)).toBeUndefined()
    expect(Stall.intervalMs(100)).toBe(50)
    expect(Stall.intervalMs(30_000)).toBe(1000)
  })
})
