import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Tracer } from "effect"
import { defaultTracer, parseTraceparent, spanWithContextIfTraced, traceparent } from "../src/internal/tracing.js"
import { recordingTracer } from "./support/tracing.js"

// Docket's spans are made only under an application's tracer (src/internal/tracing.ts).
describe("spanWithContextIfTraced", () => {
  const inner = spanWithContextIfTraced(
    "docket.test",
    { attributes: { n: 1 } },
    (traceContext) => Effect.map(Effect.option(Effect.currentSpan), (span) => ({ span, traceContext }))
  )

  it.effect("under Effect's built-in tracer no span is made (and no span context is given)", () =>
    Effect.gen(function*() {
      expect(yield* Effect.tracer).toBe(defaultTracer)
      const { span, traceContext } = yield* inner
      expect(Option.isNone(span)).toBe(true)
      expect(traceContext).toBeNull()
    }))

  it.effect("under another tracer the effect runs in a span of that name, with its attributes (and is given its context)", () =>
    Effect.gen(function*() {
      const { made, tracer } = recordingTracer()
      const { span, traceContext } = yield* Effect.withTracer(inner, tracer)
      expect(Option.getOrUndefined(span)?.name).toBe("docket.test")
      expect(made.map((s) => [s.name, Object.fromEntries(s.attributes)])).toEqual([["docket.test", { n: 1 }]])
      expect(traceContext).toBe(traceparent(made[0]))
    }))
})

// The span context an item carries across the queue (W3C traceparent).
describe("traceparent and parseTraceparent", () => {
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
  const spanId = "00f067aa0ba902b7"

  it("a span's context as a traceparent, and back", () => {
    const span = Tracer.externalSpan({ traceId, spanId, sampled: true })
    expect(traceparent(span)).toBe(`00-${traceId}-${spanId}-01`)
    expect(traceparent(Tracer.externalSpan({ traceId, spanId, sampled: false }))).toBe(`00-${traceId}-${spanId}-00`)
    expect(parseTraceparent(`00-${traceId}-${spanId}-01`)).toMatchObject({ _tag: "ExternalSpan", traceId, spanId, sampled: true })
    expect(parseTraceparent(`00-${traceId}-${spanId}-02`)?.sampled).toBe(false)
  })

  it("ids that are not W3C ids make no traceparent", () => {
    expect(traceparent(Tracer.externalSpan({ traceId: "abc", spanId, sampled: true }))).toBeNull()
    expect(traceparent(Tracer.externalSpan({ traceId, spanId: "0".repeat(16), sampled: true }))).toBeNull()
  })

  it("a missing or malformed stored value is ignored", () => {
    for (
      const bad of [
        null,
        undefined,
        "",
        "garbage",
        `01-${traceId}-${spanId}-01`, // another version
        `00-${traceId.toUpperCase()}-${spanId}-01`,
        `00-${"0".repeat(32)}-${spanId}-01`,
        `00-${traceId}-${"0".repeat(16)}-01`,
        `00-${traceId}-${spanId}-01-extra`,
        `00-${traceId}-${spanId}-1`,
        ` 00-${traceId}-${spanId}-01`
      ]
    ) {
      expect(parseTraceparent(bad), String(bad)).toBeUndefined()
    }
  })
})
