/**
 * A TypeScript (.mts) task file using typed outcomes: a month that cannot
 * exist is `Permanent` (dead at once, no retries); anything else succeeds.
 */
import { Handler, Permanent } from "docket"
import { Effect, Schema } from "effect"

export default Handler.make("report.build", {
  payload: Schema.Struct({ month: Schema.String }),
  run: ({ month }) =>
    /^\d{4}-(0[1-9]|1[0-2])$/.test(month)
      ? Effect.sleep("80 millis")
      : Effect.fail(new Permanent({ reason: `no such month: ${month}` }))
})
