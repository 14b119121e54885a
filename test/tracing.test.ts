import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { defaultTracer, spanIfTraced } from "../src/internal/tracing.js"
import { recordingTracer } from "./support/tracing.js"

// Docket's spans are made only under an application's tracer (src/internal/tracing.ts).
describe("spanIfTraced", () => {
  const inner = spanIfTraced("docket.test", { attributes: { n: 1 } })(Effect.option(Effect.currentSpan))

  it.effect("under Effect's built-in tracer no span is made", () =>
    Effect.gen(function*() {
      expect(yield* Effect.tracer).toBe(defaultTracer)
      expect(Option.isNone(yield* inner)).toBe(true)
    }))

  it.effect("under another tracer the effect runs in a span of that name, with its attributes", () =>
    Effect.gen(function*() {
      const { made, tracer } = recordingTracer()
      const span = yield* Effect.withTracer(inner, tracer)
      expect(Option.getOrUndefined(span)?.name).toBe("docket.test")
      expect(made.map((s) => [s.name, Object.fromEntries(s.attributes)])).toEqual([["docket.test", { n: 1 }]])
    }))
})
