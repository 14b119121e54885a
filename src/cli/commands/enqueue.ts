/**
 * `docket enqueue`: one item from the arguments, or (with `--from`) the items
 * of an NDJSON file, see enqueueBulk.ts.
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { usage } from "../errors.js"
import * as V from "../../internal/validate.js"
import { checkRequest, looksLikeOption, parsePayload, unknownOption } from "../input.js"
import {
  databaseOption,
  databaseUrl,
  durationOption,
  fromEither,
  integerOption,
  optionalText,
  timeOption
} from "../options.js"
import { withRepo } from "../queue.js"
import { enqueueBulk } from "./enqueueBulk.js"

const enqueueConfig = {
  database: databaseOption,
  kind: Args.text({ name: "kind" }).pipe(Args.withDescription("The item's kind (its handler's name)."), Args.optional),
  payload: Args.text({ name: "json-payload" }).pipe(
    Args.withDescription("The payload as JSON (default null)."),
    Args.optional
  ),
  key: optionalText("key", "key", "Dedupe key: while an item of this kind and key waits, another is not added."),
  delay: durationOption("delay", "Due after this long: 500ms, 30s, 5m, 1h or milliseconds.").pipe(Options.optional),
  runAt: timeOption("run-at", "Due at this ISO 8601 time (2030-01-01T09:00:00Z; without an offset, local time).")
    .pipe(Options.optional),
  priority: integerOption("priority", "Higher runs first among due items. Default: 0.", {
    min: -V.MAX_PRIORITY,
    max: V.MAX_PRIORITY
  }).pipe(Options.optional),
  maxAttempts: integerOption(
    "max-attempts",
    "Attempts before the item is dead. Default: the queue's, 8.",
    { min: 1, max: V.MAX_ATTEMPTS_LIMIT }
  ).pipe(Options.optional),
  from: optionalText(
    "from",
    "file",
    "Bulk: an NDJSON file (or - for stdin), one object a line: " +
      `{"kind":..,"payload":..,"key"?,"delay"?,"runAt"?,"priority"?,"maxAttempts"?}. ` +
      "A bad line refuses the whole file."
  )
}

/** The parsed arguments and options of `docket enqueue`. */
export type EnqueueArgs = Command.Command.ParseConfig<typeof enqueueConfig>

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
      delay,
      runAt,
      priority: Option.getOrUndefined(args.priority),
      maxAttempts: Option.getOrUndefined(args.maxAttempts)
    }))
    const result = yield* withRepo(databaseUrl(args.database), (repo) => repo.enqueue(kind, request.payload, request))
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
