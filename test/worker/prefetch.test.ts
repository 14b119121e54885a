import { describe, expect, it } from "@effect/vitest"
import * as Prefetch from "../../src/internal/worker/prefetch.js"

// Prefetch sizing (src/internal/worker/prefetch.ts): pure functions.
describe("prefetch sizing", () => {
  it("sizes to half the hold time's worth of starts, between the concurrency and the bound", () => {
    // 10 starts per ms over a 1 s hold: 5,000 items.
    expect(Prefetch.fromRate(10, 1000, 10, 8000)).toBe(5000)
    // Slow handlers: never below the floor (the concurrency).
    expect(Prefetch.fromRate(0.001, 1000, 10, 8000)).toBe(10)
    expect(Prefetch.fromRate(0, 1000, 10, 8000)).toBe(10)
    // Fast ones: never above the bound.
    expect(Prefetch.fromRate(100, 1000, 10, 8000)).toBe(8000)
    // Rounded up: 0.015 * 1000 * 0.5 = 7.5 -> 8.
    expect(Prefetch.fromRate(0.015, 1000, 1, 8000)).toBe(8)
  })

  it("slow start quadruples, within the floor and the bound", () => {
    expect(Prefetch.grown(10, 10, 8000)).toBe(40)
    expect(Prefetch.grown(2500, 10, 8000)).toBe(8000)
    expect(Prefetch.grown(0, 5, 8000)).toBe(5)
    // Five claims from 10 to the bound (doubling took ten).
    let p = 10
    for (let i = 0; i < 5; i++) p = Prefetch.grown(p, 10, 8000)
    expect(p).toBe(8000)
  })

  it("room is free slots plus the prefetch less what is held; none while paused beyond the free slots", () => {
    const base = { concurrency: 10, prefetch: 100, paused: false, running: 4, buffered: 30, maxClaim: 10_000 }
    expect(Prefetch.room(base)).toBe(10 + 100 - 4 - 30)
    expect(Prefetch.room({ ...base, paused: true })).toBe(10 - 4 - 30)
    expect(Prefetch.room({ ...base, prefetch: 50_000 })).toBe(10_000)
  })

  it("claims when there is room and slots starve or the buffer is at its low water", () => {
    expect(Prefetch.lowWater(100)).toBe(50)
    expect(Prefetch.lowWater(9)).toBe(4)
    expect(Prefetch.shouldClaim(10, false, 50, 100)).toBe(true)
    expect(Prefetch.shouldClaim(10, false, 51, 100)).toBe(false)
    expect(Prefetch.shouldClaim(10, true, 51, 100)).toBe(true)
    expect(Prefetch.shouldClaim(0, true, 0, 100)).toBe(false)
    expect(Prefetch.shouldClaim(-3, true, 0, 100)).toBe(false)
  })

  it("measures the start rate over windows of at least 250 ms", () => {
    const p = new Prefetch.Prefetch(8000, 10, 1000, 0)
    expect(p.current).toBe(10)
    p.adapt(100, 5000) // too short a window: unchanged
    expect(p.current).toBe(10)
    p.adapt(500, 5000) // 5,000 starts in 500 ms = 10/ms -> 5,000
    expect(p.current).toBe(5000)
    expect(p.lowWater()).toBe(2500)
    p.adapt(1000, 5010) // 10 starts in 500 ms: back to the floor
    expect(p.current).toBe(10)
    p.grow()
    expect(p.current).toBe(40)
  })

  it("a bound below the concurrency is the floor too", () => {
    const p = new Prefetch.Prefetch(0, 10, 1000, 0)
    expect(p.current).toBe(0)
    p.grow()
    expect(p.current).toBe(0)
    p.adapt(1000, 1_000_000)
    expect(p.current).toBe(0)
  })
})
