/**
 * The claimer's mode (src/internal/worker/mode.ts) and the pool's state that
 * holds it (state.ts): the table's allowed changes, the refused ones (a
 * defect, thrown), and what each mode means to the rest of the pool.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Claim } from "../../src/Domain.js"
import * as Mode from "../../src/internal/worker/mode.js"
import type { ClaimerMode } from "../../src/internal/worker/mode.js"
import { PoolState, type Slot } from "../../src/internal/worker/state.js"

const modes: ReadonlyArray<ClaimerMode> = ["claiming", "drained", "empty", "stopping", "stopped"]
const claim = { id: 1, kind: "job" } as unknown as Claim
const slot = (): Slot => ({ fiber: undefined, current: undefined, controller: undefined })

describe("the claimer's mode", () => {
  it("allows exactly the changes of its table", () => {
    const allowed = modes.flatMap((from) => modes.filter((to) => Mode.ALLOWED[from].includes(to)).map((to) => `${from}->${to}`))
    expect(allowed).toEqual([
      "claiming->claiming", "claiming->drained", "claiming->empty", "claiming->stopping",
      "drained->claiming", "drained->drained", "drained->empty", "drained->stopping",
      "empty->claiming", "empty->drained", "empty->empty", "empty->stopping",
      "stopping->stopped"
    ])
    for (const from of modes) {
      for (const to of modes) {
        if (Mode.ALLOWED[from].includes(to)) expect(Mode.change(from, to)).toBe(to)
        else expect(() => Mode.change(from, to)).toThrow(`docket: the claimer's mode cannot change from ${from} to ${to}`)
      }
    }
  })

  it("a claim's result: all it asked for is claiming, fewer is drained, none is empty", () => {
    expect(Mode.afterClaim(10, 10)).toBe("claiming")
    expect(Mode.afterClaim(3, 10)).toBe("drained")
    expect(Mode.afterClaim(0, 10)).toBe("empty")
  })

  it("the state starts claiming and checks every change: claiming again once stopping is refused, and stopping twice", () => {
    const state = new PoolState(new Map())
    expect(state.mode).toBe(Mode.INITIAL)
    expect(Mode.INITIAL).toBe("claiming")
    state.setMode("empty")
    state.setMode("drained")
    state.setMode("stopping")
    expect(() => state.setMode("claiming")).toThrow("cannot change from stopping to claiming")
    expect(() => state.setMode("stopping")).toThrow("cannot change from stopping to stopping")
    expect(state.mode).toBe("stopping")
    state.setMode("stopped")
    expect(() => state.setMode("stopping")).toThrow("cannot change from stopped to stopping")
    expect(state.mode).toBe("stopped")
  })

  it("stopping and stopped: no item starts (the buffer keeps it for the slots' stop to give back)", () => {
    const state = new PoolState(new Map())
    state.buffer.push(claim, 0)
    expect(state.stopping).toBe(false)
    state.setMode("stopping")
    expect(state.stopping).toBe(true)
    expect(state.takeOne()).toBeUndefined()
    // A parked slot must wake to end.
    expect(state.hasStartable()).toBe(true)
    state.setMode("stopped")
    expect(state.stopping).toBe(true)
    expect(state.buffer.size).toBe(1)
  })

  it("quiet (for whenIdle): only once no claim is to come and nothing runs or is buffered", () => {
    const state = new PoolState(new Map())
    expect(state.quiet()).toBe(false)
    state.setMode("drained")
    expect(state.quiet()).toBe(true)
    state.setMode("claiming")
    expect(state.quiet()).toBe(false)
    state.setMode("empty")
    expect(state.quiet()).toBe(true)
    const run = state.begin(claim, slot(), 0)
    expect(state.quiet()).toBe(false)
    state.end(run)
    state.buffer.push(claim, 0)
    expect(state.quiet()).toBe(false)
    state.buffer.takeAll()
    state.setMode("stopping")
    expect(state.quiet()).toBe(true)
  })
})
