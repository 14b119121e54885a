/**
 * The decoding of activities' results and deferreds' exits, with one schema
 * per pair of success and error schemas, kept.
 *
 * Effect's `makeUnsafe` decodes each result with the activity's (or
 * deferred's) own `exitSchema`, an `ExitFromSelf` built by each
 * `Activity.make` (and `DurableClock.sleep`), which a workflow calls as it
 * runs: so every decode compiled a new parser, building the Cause's schemas
 * again (measured: most of an activity's cost in Effect's own in-memory
 * engine, about 0.5 ms of 0.74). The schema is the same whenever the
 * success and error schemas are (those a workflow names, module constants
 * as a rule), so it is built once per pair here and its parser is compiled
 * once (Effect keeps parsers by schema). Pairs are held weakly: a schema
 * made per call is not kept.
 */
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"

type Decode = (exit: unknown) => Effect.Effect<Exit.Exit<unknown, unknown>, unknown, unknown>

const byPair = new WeakMap<object, WeakMap<object, Decode>>()

/** The decoder of `Exit`s of `success` and `error` (as `ExitFromSelf` with `Schema.Defect`). */
const decoder = (success: Schema.Schema.Any, error: Schema.Schema.All): Decode => {
  let byError = byPair.get(success)
  if (byError === undefined) byPair.set(success, byError = new WeakMap())
  let decode = byError.get(error)
  if (decode === undefined) {
    const schema = Schema.ExitFromSelf({ success, failure: error, defect: Schema.Defect }) as unknown as Schema.Schema<
      Exit.Exit<unknown, unknown>,
      unknown,
      unknown
    >
    decode = Schema.decodeUnknown(schema)
    byError.set(error, decode)
  }
  return decode
}

/** An encoded exit, decoded with the schemas of `of` (an activity or a deferred); a failure is a defect, as Effect's engine has it. */
export const decodeExit = (
  of: { readonly successSchema: Schema.Schema.Any; readonly errorSchema: Schema.Schema.All },
  exit: unknown
): Effect.Effect<Exit.Exit<unknown, unknown>> =>
  Effect.orDie(decoder(of.successSchema, of.errorSchema)(exit)) as Effect.Effect<Exit.Exit<unknown, unknown>>
