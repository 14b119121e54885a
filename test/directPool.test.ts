import { describe, expect, it } from "vitest"
import { int8Numbers } from "../src/internal/directPool.js"

// Docket's own statements read bigint columns as numbers (directPool.ts):
// exact below 2^53, left as pg's string above it, other types untouched.
describe("int8Numbers", () => {
  const fallback = { getTypeParser: (oid: number) => (text: string) => `fallback ${oid}: ${text}` }
  const types = int8Numbers(fallback)
  const int8 = types.getTypeParser(20, "text") as (text: string) => unknown

  it("reads a bigint as a number while it is exact", () => {
    expect(int8("0")).toBe(0)
    expect(int8("1765130000123")).toBe(1765130000123)
    expect(int8("-42")).toBe(-42)
    expect(int8(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER)
  })

  it("leaves a bigint past 2^53 as its decimal string", () => {
    expect(int8("9007199254740993")).toBe("9007199254740993")
    expect(int8("-9223372036854775808")).toBe("-9223372036854775808")
  })

  it("keeps the pool's parsers for every other type, and for binary bigints", () => {
    expect((types.getTypeParser(23, "text") as (t: string) => unknown)("7")).toBe("fallback 23: 7")
    expect((types.getTypeParser(20, "binary") as (t: string) => unknown)("x")).toBe("fallback 20: x")
  })
})
