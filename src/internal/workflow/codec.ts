/**
 * How the engine's values are stored: as JSON text, encoded with the
 * workflow's, activity's or deferred's own schemas (an execution's payload
 * and result) or with `Unknown` where the engine's contract hands over values
 * already encoded (an activity's result, a deferred's exit: the engine's
 * caller, `WorkflowEngine.makeUnsafe`, decodes them with the activity's or
 * deferred's schema). Defects are kept as Effect's `Schema.Defect` keeps them
 * (an Error's name and message), so a failure read back on replay, in another
 * process, is the failure that happened.
 */
import type * as Workflow from "@effect/workflow/Workflow"
import { type Complete, Result } from "@effect/workflow/Workflow"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"

/** An encoded Exit of unknown (already encoded) values, as the engine's contract passes deferreds. */
const ExitUnknown = Schema.Exit({ success: Schema.Unknown, failure: Schema.Unknown, defect: Schema.Defect })

/** An activity's result with its (already encoded) values. */
const ResultUnknown = Result({ success: Schema.Unknown, error: Schema.Unknown })

const parse = (text: string): Effect.Effect<unknown> => Effect.try(() => JSON.parse(text) as unknown).pipe(Effect.orDie)

/** JSON of an activity's finished result (a `Complete`; its values encoded already). */
export const encodeActivity = (result: Workflow.Result<unknown, unknown>): Effect.Effect<string> =>
  Effect.map(Effect.orDie(Schema.encode(ResultUnknown)(result)), (encoded) => JSON.stringify(encoded))

/** An activity's stored result. */
export const decodeActivity = (text: string): Effect.Effect<Workflow.Result<unknown, unknown>> =>
  Effect.flatMap(parse(text), (json) => Effect.orDie(Schema.decodeUnknown(ResultUnknown)(json)))

/** JSON of a deferred's exit (its values encoded already). */
export const encodeExit = (exit: Exit.Exit<unknown, unknown>): Effect.Effect<string> =>
  Effect.map(Effect.orDie(Schema.encode(ExitUnknown)(exit)), (encoded) => JSON.stringify(encoded))

/** A deferred's stored exit. */
export const decodeExit = (text: string): Effect.Effect<Exit.Exit<unknown, unknown>> =>
  Effect.flatMap(parse(text), (json) => Effect.orDie(Schema.decodeUnknown(ExitUnknown)(json)))

// A workflow's schemas, with their context erased: the engine runs them where
// the workflow's layer provided what they need (as Effect's own engines do).
type Erased = Schema.Schema<unknown, unknown, never>
const erase = (schema: Schema.Schema.All): Erased => schema as unknown as Erased

const resultSchemas = new WeakMap<Workflow.Any, Erased>()
const resultSchema = (workflow: Workflow.Any): Erased => {
  let schema = resultSchemas.get(workflow)
  if (schema === undefined) {
    schema = erase(Result({ success: workflow.successSchema, error: workflow.errorSchema }))
    resultSchemas.set(workflow, schema)
  }
  return schema
}

/** JSON of an execution's payload, with its workflow's schema: a payload that does not encode is a ParseError. */
export const encodePayload = (workflow: Workflow.Any, payload: unknown) =>
  Effect.map(Schema.encodeUnknown(erase(workflow.payloadSchema))(payload), (json) => JSON.stringify(json))

/** An execution's stored payload, decoded with its workflow's schema. */
export const decodePayload = (workflow: Workflow.Any, text: string) =>
  Effect.flatMap(parse(text), (json) => Schema.decodeUnknown(erase(workflow.payloadSchema))(json))

/** JSON of an execution's result (a `Complete`), with its workflow's schemas. */
export const encodeResult = (workflow: Workflow.Any, result: Workflow.Result<unknown, unknown>): Effect.Effect<string> =>
  Effect.map(Effect.orDie(Schema.encode(resultSchema(workflow))(result)), (json) => JSON.stringify(json))

/** An execution's stored result, decoded with its workflow's schemas. */
export const decodeResult = (workflow: Workflow.Any, text: string): Effect.Effect<Workflow.Result<unknown, unknown>> =>
  Effect.flatMap(parse(text), (json) =>
    Effect.map(
      Effect.orDie(Schema.decodeUnknown(resultSchema(workflow))(json)),
      (result) => result as Workflow.Result<unknown, unknown>
    ))

/** Whether a result is finished (a `Complete`). */
export const isComplete = (result: Workflow.Result<unknown, unknown>): result is Complete<unknown, unknown> =>
  result._tag === "Complete"
