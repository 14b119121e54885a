/**
 * `docket dead list | retry | delete`: the dead items of a queue. A SQLite
 * file that does not exist is refused, not made.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as Chunk from "effect/Chunk"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type * as QueueRepo from "../../QueueRepo.js"
import { CommandFailed, usage, type UsageError } from "../errors.js"
import { clip, foldLines, listIds, plural } from "../format.js"
import { databaseOption, jsonOption, kindOption, readInteger } from "../options.js"
import { withExistingRepo } from "../queue.js"

const PAGE = 500

/** Every dead item (of a kind), page by page. */
const deadItems = (repo: QueueRepo.Service, kind: string | undefined) =>
  Stream.paginateChunkEffect(0, (after) =>
    Effect.map(repo.listDead({ kind, after, limit: PAGE }), (items) => [
      Chunk.fromIterable(items),
      items.length < PAGE ? Option.none<number>() : Option.some(items[items.length - 1].id)
    ] as const))

/** The dead items as one JSON array, an item a line, written as they are read. */
const printJson = <E>(items: Stream.Stream<QueueRepo.Item, E>) =>
  Effect.gen(function*() {
    let first = true
    yield* Effect.sync(() => process.stdout.write("["))
    yield* Stream.runForEach(items, (item) =>
      Effect.sync(() => {
        process.stdout.write((first ? "\n" : ",\n") + JSON.stringify(item))
        first = false
      }))
    yield* Effect.sync(() => process.stdout.write(first ? "]\n" : "\n]\n"))
  })

/** The dead items as tab-separated lines under a header; how many there were. */
const printText = <E>(items: Stream.Stream<QueueRepo.Item, E>) =>
  Effect.gen(function*() {
    let n = 0
    yield* Stream.runForEach(items, (item) =>
      Effect.suspend(() => {
        const header = n++ === 0 ? Console.log("ID\tKIND\tATTEMPTS\tLAST ERROR\tPAYLOAD") : Effect.void
        const error = clip(foldLines(item.lastError ?? ""), 120)
        // Attempts of its own budget; without one (its handler's applied) the count alone.
        const attempts = item.maxAttempts === null ? `${item.attempts}` : `${item.attempts}/${item.maxAttempts}`
        return Effect.zipRight(
          header,
          Console.log(
            `${item.id}\t${item.kind}\t${attempts}\t${error}\t${
              clip(JSON.stringify(item.payload), 120)
            }`
          )
        )
      }))
    return n
  })

const deadList = Command.make(
  "list",
  { database: databaseOption, kind: kindOption("Only dead items of this kind."), json: jsonOption },
  ({ database, json, kind }) =>
    withExistingRepo(database, (repo) =>
      Effect.gen(function*() {
        const k = Option.getOrUndefined(kind)
        if (json) return yield* printJson(deadItems(repo, k))
        const n = yield* printText(deadItems(repo, k))
        if (n === 0) yield* Console.log(k === undefined ? "no dead items" : `no dead items of kind ${k}`)
      }))
).pipe(Command.withDescription("Lists dead items: id, kind, attempts, last error and payload."))

const selectionConfig = (verb: string) => ({
  database: databaseOption,
  ids: Args.text({ name: "id" }).pipe(
    Args.withDescription(`Ids of dead items to ${verb}.`),
    Args.mapEffect((text) =>
      Either.match(readInteger("id", text, { min: 1 }), {
        onLeft: () => Effect.fail(HelpDoc.p(`'${text}' is not an item id`)),
        onRight: Effect.succeed
      })
    ),
    Args.repeated
  ),
  all: Options.boolean("all").pipe(
    Options.withDescription(`${verb === "retry" ? "Retry" : "Delete"} every dead item (of --kind, if given).`)
  ),
  kind: kindOption("With --all: only dead items of this kind.")
})

const selection = (
  ids: ReadonlyArray<number>,
  all: boolean,
  kind: Option.Option<string>
): Effect.Effect<QueueRepo.DeadSelection, UsageError> => {
  if (ids.length > 0 && all) return Effect.fail(usage("give ids or --all, not both"))
  if (Option.isSome(kind) && !all) return Effect.fail(usage("--kind goes with --all"))
  if (ids.length === 0 && !all) return Effect.fail(usage("give the ids of dead items, or --all"))
  return Effect.succeed(all ? { all: true, kind: Option.getOrUndefined(kind) } : { ids })
}

const deadAction = (
  verb: "retry" | "delete",
  done: string,
  act: (repo: QueueRepo.Service, s: QueueRepo.DeadSelection) => Effect.Effect<ReadonlyArray<number>, InvalidInput | StorageError>
) =>
  Command.make(verb, selectionConfig(verb), ({ all, database, ids, kind }) =>
    Effect.gen(function*() {
      const s = yield* selection(ids, all, kind)
      const changed = yield* withExistingRepo(database, (repo) => act(repo, s))
      yield* Console.log(
        changed.length === 0 ? "no dead items matched" : `${done} ${plural(changed.length, "dead item")}: ${listIds(changed)}`
      )
      if ("ids" in s) {
        const missing = [...new Set(s.ids)].filter((id) => !changed.includes(id))
        if (missing.length > 0) {
          return yield* new CommandFailed({ reason: `not dead (or no such item): ${listIds(missing)}` })
        }
      }
    }))

const deadRetry = deadAction("retry", "retried", (repo, s) => repo.retryDead(s)).pipe(
  Command.withDescription("Puts dead items back in the queue, due now, with a fresh attempt budget.")
)
const deadDelete = deadAction("delete", "deleted", (repo, s) => repo.deleteDead(s)).pipe(
  Command.withDescription("Deletes dead items for good.")
)

/** The `dead` group on its own (its help text), without its subcommands. */
export const deadGroup = Command.make("dead").pipe(Command.withDescription("Dead items: list, retry or delete them."))

/** The subcommands of `dead`. */
export const deadCommands = [deadList, deadRetry, deadDelete] as const

/** The `dead` command and its subcommands list, retry and delete. */
export const dead = deadGroup.pipe(Command.withSubcommands(deadCommands))
