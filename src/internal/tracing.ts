/**
 * Spans only where someone reads them. Effect's built-in tracer (the one a
 * runtime has unless the application installs another, e.g.
 * @effect/opentelemetry) exports nowhere, yet a span under it costs 20-25 µs
 * (measured: `withSpan` around `Effect.void`, 27.5 µs vs 3.3 µs): more than
 * the rest of Docket's own work in an enqueue. So Docket's spans are made only
 * under another tracer.
 */
import { Effect, type Tracer } from "effect"

/** Effect's built-in tracer: the one a fresh runtime has. */
export const defaultTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** `Effect.withSpan`, when the running fiber's tracer is not the built-in one. */
export const spanIfTraced = (name: string, options: Tracer.SpanOptions) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) => tracer === defaultTracer ? effect : Effect.withSpan(effect, name, options))
