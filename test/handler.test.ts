/**
 * The types of a handler's result (checked by `tsc --noEmit`, which covers
 * the tests, and by vitest's expectTypeOf): with a `result` Schema, `run`
 * must return its type and the handler carries it; without one, a handler is
 * the `Handler<A, I, E, R>` it was before results existed, whatever `run`
 * returns; plain functions keep an unknown JSON value. No `any` in sight.
 */
import { describe, expectTypeOf, it } from "vitest"
import { Effect, Schema } from "effect"
import { Docket, Handler } from "../src/index.js"

const Payload = Schema.Struct({ to: Schema.String })

describe("a handler's result type", () => {
  it("a result Schema types run's value and the handler", () => {
    const Typed = Handler.make("typed", {
      payload: Payload,
      result: Schema.Struct({ id: Schema.Number, at: Schema.Date }),
      run: ({ to }) => Effect.succeed({ id: to.length, at: new Date() })
    })
    expectTypeOf<Handler.Result<typeof Typed>>().toEqualTypeOf<{ readonly id: number; readonly at: Date }>()
    expectTypeOf(Typed).toMatchTypeOf<Handler.Any>()
    // A typed client still works with it.
    expectTypeOf(Docket.client(Typed).enqueue).parameter(0).toEqualTypeOf<{ readonly to: string }>()

    Handler.make("wrong", {
      payload: Payload,
      // @ts-expect-error run's value and the result Schema's type disagree (reported on the schema)
      result: Schema.Struct({ id: Schema.Number }),
      run: () => Effect.succeed({ id: "not a number" })
    })
    Handler.make("nothing", {
      payload: Payload,
      // @ts-expect-error a result Schema needs run to return a value of its type (reported on the schema)
      result: Schema.Number,
      run: () => Effect.void
    })
  })

  it("without a result Schema, a handler is Handler<A, I, E, R>, whatever run returns", () => {
    const Plain = Handler.make("plain", { payload: Payload, run: () => Effect.void })
    expectTypeOf(Plain).toEqualTypeOf<Handler.Handler<{ readonly to: string }, { readonly to: string }, never, never>>()
    const Returns = Handler.make("returns", { payload: Payload, run: () => Effect.succeed(42) })
    expectTypeOf(Returns).toEqualTypeOf<Handler.Handler<{ readonly to: string }, { readonly to: string }, never, never>>()
    expectTypeOf<Handler.Result<typeof Plain>>().toEqualTypeOf<void>()
    // Code written against Handler<A, I, E, R> keeps compiling.
    const takesOld = <A, I, E, R>(h: Handler.Handler<A, I, E, R>) => h.kind
    takesOld(Plain)
    takesOld(Returns)
  })

  it("a plain function keeps its JSON value: unknown, not any", () => {
    const FromPromise = Handler.fromPromise("promise", async () => ({ ok: true }))
    expectTypeOf<Handler.Result<typeof FromPromise>>().toEqualTypeOf<unknown>()
    expectTypeOf<Handler.Result<typeof FromPromise>>().not.toBeAny()
  })
})
