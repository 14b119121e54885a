/**
 * How far the command lets V8's heap grow (src/cli/heap.ts): the factor it
 * sets, and what the operator may choose instead.
 */
import { describe, expect, it } from "vitest"
import { growingPercent, HEAP_GROWING_PERCENT } from "../../src/cli/heap.js"

describe("the command's heap growing factor", () => {
  it("is 2x by default (percent 100)", () => {
    expect(HEAP_GROWING_PERCENT).toBe(100)
    expect(growingPercent([], undefined)).toEqual({ percent: 100 })
    expect(growingPercent([], "")).toEqual({ percent: 100 })
  })

  it("takes the operator's whole number from 0 (V8's own choice) to 1000", () => {
    expect(growingPercent([], "0")).toEqual({ percent: 0 })
    expect(growingPercent([], " 50 ")).toEqual({ percent: 50 })
    expect(growingPercent([], "1000")).toEqual({ percent: 1000 })
  })

  it("refuses anything else, naming the variable and the value", () => {
    for (const value of ["1001", "-1", "1.5", "lots", "1e2", "0x10", "50%"]) {
      const chosen = growingPercent([], value)
      expect(chosen, value).toEqual({
        error: `DOCKET_HEAP_GROWING_PERCENT must be a whole number from 0 to 1000 (0: V8's own choice), not ${JSON.stringify(value)}`
      })
    }
  })

  it("leaves a factor given to node itself as given", () => {
    expect(growingPercent(["--heap-growing-percent=30"], undefined)).toEqual({ percent: undefined })
    expect(growingPercent(["--heap_growing_percent=30"], "70")).toEqual({ percent: undefined })
    expect(growingPercent(["--max-old-space-size=100"], undefined)).toEqual({ percent: 100 })
  })
})
