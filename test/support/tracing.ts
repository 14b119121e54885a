import { Effect, Tracer } from "effect"

/** A tracer that makes the built-in tracer's spans and keeps each one it made, for tests to read. */
export const recordingTracer = (): { readonly tracer: Tracer.Tracer; readonly made: Array<Tracer.Span> } => {
  const builtIn = Effect.runSync(Effect.tracer)
  const made: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (...args) => {
      const span = builtIn.span(...args)
      made.push(span)
      return span
    },
    context: builtIn.context
  })
  return { tracer, made }
}
