/**
 * `docket enqueue`: one item from the arguments, or (with `--from`) the items
 * of an NDJSON file, see enqueueBulk.ts.
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { usage } from "../errors.js"
import { checkRequest, looksLikeOption, parsePayload, unknownOption } from "../input.js"
import { fromEither } from "../options.js"
import { withRepo } from "../queue.js"
import { enqueueBulk } from "./enqueueBulk.js"
import { type EnqueueArgs, enqueueConfig } from "./enqueueOptions.js"

const enqueueOne = (args: EnqueueArgs, kind: string) =>
  Effect.gen(function*() {
    const payload = yield* Option.match(args.payload, {
      onNone: () => Effect.succeed(null as unknown),
      onSome: (text) => fromEither(parsePayload(text))
    })
    const delay = Option.getOrUndefined(args.delay)
    const runAt = Option.getOrUndefined(args.runAt)
    const request = yield* fromEither(checkRequest({
      kind,
      payload,
      key: Option.getOrUndefined(args.key),
      group: Option.getOrUndefined(args.group),
      delay,
      runAt,
      priority: Option.getOrUndefined(args.priority),
      maxAttempts: Option.getOrUndefined(args.maxAttempts)
    }))
    const result = yield* withRepo(args.database, (repo) => repo.enqueue(kind, request.payload, request))
    yield* Console.log(
      result._tag === "Enqueued"
        ? String(result.id)
        : `deduplicated: item ${result.id} of kind ${kind} with key ${request.key} is already waiting`
    )
  })

/** The `enqueue` command: prints the new item's id, or that an item with its kind and key already waits. */
export const enqueue = Command.make("enqueue", enqueueConfig, (args) =>
  Option.match(args.from, {
    onSome: (from) => enqueueBulk(args, from),
    onNone: () =>
      Option.match(args.kind, {
        onNone: () => Effect.fail(usage("give the kind of the item (or --from <file>)")),
        onSome: (kind) => looksLikeOption(kind) ? Effect.fail(unknownOption(kind)) : enqueueOne(args, kind)
      })
  })).pipe(
    Command.withDescription(
      "Adds an item: prints its id, or says an item with the same kind and key was already waiting. " +
        "With --from, adds the items of an NDJSON file in batches."
    )
  )
