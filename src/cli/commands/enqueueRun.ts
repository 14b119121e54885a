/**
 * What `docket enqueue` does with its parsed arguments: one item from the
 * arguments, or (with `--from`) the items of an NDJSON file, see
 * enqueueBulk.ts. Without @effect/cli: enqueue.ts gives it what @effect/cli
 * parsed, hotArgv.ts what it parsed by hand.
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { usage } from "../errors.js"
import { checkRequest, looksLikeOption, parsePayload, unknownOption } from "../input.js"
import { withRepo } from "../queue.js"
import { fromEither } from "../values.js"
import { enqueueBulk } from "./enqueueBulk.js"
import type { EnqueueArgs } from "./enqueueOptions.js"
import type * as QueueRepo from "../../QueueRepo.js"

// What the command prints: a new item's id alone (what scripts read), or
// what became of the waiting item that held the key; and the running items
// a replaceRunning enqueue cancelled.
const said = (result: QueueRepo.EnqueueResult, kind: string, key: string | undefined) => {
  const held = `item ${result.id} of kind ${kind} with key ${key}`
  if (result._tag === "Deduplicated") return `deduplicated: ${held} is already waiting`
  const cancelled = result.cancelled === undefined || result.cancelled.length === 0
    ? ""
    : ` (cancelled running ${result.cancelled.length === 1 ? "item" : "items"} ${result.cancelled.join(", ")})`
  return (result._tag === "Enqueued" ? String(result.id) : `replaced: ${held} waits with the new payload`) + cancelled
}

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
      onConflict: Option.getOrUndefined(args.onConflict),
      group: Option.getOrUndefined(args.group),
      delay,
      runAt,
      priority: Option.getOrUndefined(args.priority),
      maxAttempts: Option.getOrUndefined(args.maxAttempts)
    }))
    const result = yield* withRepo(args.database, (repo) => repo.enqueue(kind, request.payload, request))
    yield* Console.log(said(result, kind, request.key))
  })

/** Runs `docket enqueue`: prints the new item's id, or that an item with its kind and key already waits. */
export const runEnqueue = (args: EnqueueArgs) =>
  Option.match(args.from, {
    onSome: (from) => enqueueBulk(args, from),
    onNone: () =>
      Option.match(args.kind, {
        onNone: () => Effect.fail(usage("give the kind of the item (or --from <file>)")),
        onSome: (kind) => looksLikeOption(kind) ? Effect.fail(unknownOption(kind)) : enqueueOne(args, kind)
      })
  })
