/**
 * Spans only where someone reads them. Effect's built-in tracer (the one a
 * runtime has unless the application installs another, e.g.
 * @effect/opentelemetry) exports nowhere, yet a span under it costs 20-25 µs
 * (measured: `withSpan` around `Effect.void`, 27.5 µs vs 3.3 µs): more than
 * the rest of Docket's own work in an enqueue. So Docket's spans are made only
 * under another tracer, and so is the span context an item carries across the
 * queue (W3C traceparent: stored at enqueue, linked from the run's span).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"

/** Effect's built-in tracer: the one a fresh runtime has. */
export const defaultTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/**
 * `Effect.withSpan` when the running fiber's tracer is not the built-in one,
 * giving `f` the new span's context as a W3C traceparent (null under the
 * built-in tracer: no span, no other work).
 */
export const spanWithContextIfTraced = <A, E, R>(
  name: string,
  options: Tracer.SpanOptions,
  f: (traceContext: string | null) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) =>
    tracer === defaultTracer ? f(null) : Effect.withSpan(
      Effect.flatMap(Effect.option(Effect.currentSpan), (span) => f(Option.isSome(span) ? traceparent(span.value) : null)),
      name,
      options
    )
  )

const TRACE_ID = /^[0-9a-f]{32}$/
const SPAN_ID = /^[0-9a-f]{16}$/
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

// The W3C trace context spec: an all-zero trace or span id is invalid.
const valid = (traceId: string, spanId: string) =>
  TRACE_ID.test(traceId) && SPAN_ID.test(spanId) && !/^0+$/.test(traceId) && !/^0+$/.test(spanId)

/**
 * A span's context as a W3C traceparent (`00-<trace id>-<span id>-<flags>`),
 * or null when its ids are not W3C ids (a tracer of another scheme).
 */
export const traceparent = (span: Tracer.AnySpan): string | null =>
  valid(span.traceId, span.spanId) ? `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}` : null

/**
 * A stored traceparent as a span to link to; none when it is missing or
 * malformed (a stored value is never trusted: a bad one is ignored).
 */
export const parseTraceparent = (text: string | null | undefined): Tracer.ExternalSpan | undefined => {
  if (typeof text !== "string") return undefined
  const match = TRACEPARENT.exec(text)
  if (match === null || !valid(match[1], match[2])) return undefined
  return Tracer.externalSpan({ traceId: match[1], spanId: match[2], sampled: (parseInt(match[3], 16) & 1) === 1 })
}
