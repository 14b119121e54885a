/**
 * A task file with a typed Docket handler: the payload is decoded with the
 * Schema before `run`, so an item whose payload does not match (say
 * `{"name": 42}`) is dead at once with a DecodeError, never retried.
 */
import { Backoff, Handler } from "docket"
import { Effect, Schema } from "effect"

export default Handler.make("greet", {
  payload: Schema.Struct({ name: Schema.String }),
  backoff: Backoff.constant("200 millis"),
  run: ({ name }, job) =>
    Effect.sleep(`${150 + (job.id * 37) % 200} millis`).pipe(
      Effect.zipRight(Effect.logDebug(`hello, ${name}`))
    )
})
