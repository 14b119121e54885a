/**
 * `docket cancel ID... [--reason TEXT]`: stops items by id, in one
 * statement. A waiting item never runs; a running one is interrupted by its
 * worker (within about a second on PostgreSQL, at its next lease renewal on
 * SQLite). A line per id says what happened; exit 0 when every id was
 * cancelled, 1 when some were not (dead or cancelled already, or no such
 * item), 2 for bad input (nothing written). A SQLite file that does not exist
 * is refused, not made.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as V from "../../internal/validate.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { CommandFailed, usage } from "../errors.js"
import { listIds, plural } from "../format.js"
import { databaseOption, jsonOption, optionalText, readInteger } from "../options.js"
import { withExistingRepo } from "../queue.js"

const config = {
  database: databaseOption,
  reason: optionalText("reason", "text", "Why: kept with each item, whose last error reads \"Cancelled: <text>\"."),
  json: jsonOption,
  ids: Args.text({ name: "id" }).pipe(
    Args.withDescription("Ids of the items to cancel."),
    Args.mapEffect((text) =>
      Either.match(readInteger("id", text, { min: 1 }), {
        onLeft: () => Effect.fail(HelpDoc.p(`'${text}' is not an item id`)),
        onRight: Effect.succeed
      })
    ),
    Args.repeated
  )
}

/** What one id's line says, and whether it was cancelled. */
const describe = (id: number, outcome: QueueRepo.CancelOutcome, item: Option.Option<QueueRepo.Item>): string => {
  switch (outcome) {
    case "cancelled":
      return `cancelled ${id} (it was waiting)`
    case "cancelledRunning":
      return `cancelled ${id} (it was running: its worker stops it)`
    case "unknown":
      return `not cancelled ${id}: no such item (never enqueued, or finished and pruned)`
    case "finished": {
      const state = Option.match(item, { onNone: () => "finished", onSome: (i) => i.state })
      return state === "dead"
        ? `not cancelled ${id}: it is dead (docket dead retry or delete it)`
        : `not cancelled ${id}: it is ${state} already`
    }
  }
}

const cancelIds = (repo: QueueRepo.Service, ids: ReadonlyArray<number>, reason: string | undefined) =>
  Effect.gen(function*() {
    const outcomes = yield* repo.cancel(ids, { reason })
    // Only to say which final state a finished item is in.
    const items = yield* Effect.forEach(ids, (id, i) =>
      outcomes[i] === "finished" ? repo.get(id) : Effect.succeed(Option.none<QueueRepo.Item>()))
    return ids.map((id, i) => ({ id, outcome: outcomes[i], item: items[i] }))
  })

/** The `cancel` command. */
export const cancel = Command.make("cancel", config, ({ database, ids, json, reason }) =>
  Effect.gen(function*() {
    if (ids.length === 0) return yield* usage("give the ids of the items to cancel")
    const why = Option.getOrUndefined(reason)
    const checked = V.checkReason(why)
    if (Either.isLeft(checked)) return yield* usage(`--reason ${checked.left.reason}`)
    const distinct = [...new Set(ids)]
    const results = yield* withExistingRepo(database, (repo) => cancelIds(repo, distinct, why))
    yield* json
      ? Console.log(JSON.stringify(results.map(({ id, outcome }) => ({ id, outcome }))))
      : Effect.forEach(results, ({ id, item, outcome }) => Console.log(describe(id, outcome, item)), { discard: true })
    const missed = results.filter((r) => r.outcome !== "cancelled" && r.outcome !== "cancelledRunning").map((r) => r.id)
    if (missed.length > 0) {
      const of = `${missed.length} of ${plural(distinct.length, "item")}`
      return yield* new CommandFailed({ reason: `${of} not cancelled: ${listIds(missed)}` })
    }
  })).pipe(
    Command.withDescription(
      "Cancels items by id: a waiting item never runs; a running one is interrupted by its worker (about a " +
        "second on PostgreSQL, its next lease renewal on SQLite). Cancelled items are kept, final. Exit 1 if " +
        "some were not cancelled (dead or cancelled already, or no such item)."
    )
  )
