/**
 * `docket kind list | pause | resume | set | reset`: kinds as things a person
 * operates, obeyed by every worker process on every host (the controls are
 * stored). A SQLite file that does not exist is refused, not made.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as QueueRepo from "../../QueueRepo.js"
import * as V from "../../internal/validate.js"
import { usage } from "../errors.js"
import { table } from "../format.js"
import { parseRate, readPeriod } from "../input.js"
import { databaseOption, jsonOption, readInteger, refuse } from "../options.js"
import { withExistingRepo } from "../queue.js"

/** The kind argument, checked while the command line is parsed (exit 2, one line); `docket group` uses it too. */
export const kindArg = Args.text({ name: "kind" }).pipe(
  Args.withDescription("The kind (letters, digits and _ . : -)."),
  Args.mapEffect((text) =>
    Either.match(V.checkKind(text), {
      onLeft: (e) => Effect.fail(HelpDoc.p(`kind '${text}' ${e.reason}`)),
      onRight: Effect.succeed
    })
  )
)

/** A rate as `docket kind` shows it: `100/1m`. */
export const formatRate = (rate: { readonly limit: number; readonly periodMs: number }): string =>
  `${rate.limit}/${readPeriod(rate.periodMs)}`

/**
 * A kind's perGroup in one cell: `1,ordered,10/1m,dead:hold` (the concurrency
 * or `-`, then only what is not the default: ordered, the rate, onFailure
 * "continue", onDead "hold"); `-` for none.
 */
export const formatPerGroup = (p: QueueRepo.PerGroupInfo | null): string =>
  p === null ? "-" : [
    p.concurrency === null ? "-" : String(p.concurrency),
    ...(p.ordered ? ["ordered"] : []),
    ...(p.rate === null ? [] : [formatRate(p.rate)]),
    ...(p.onFailure === "continue" ? ["failure:continue"] : []),
    ...(p.onDead === "hold" ? ["dead:hold"] : [])
  ].join(",")

const cell = (k: QueueRepo.KindInfo) => [
  k.kind,
  k.paused ? "paused" : "-",
  k.concurrency === null ? "-" : String(k.concurrency),
  k.rate === null ? "-" : formatRate(k.rate),
  k.concurrency === null && k.rate === null ? "-" : k.limitsSetBy,
  formatPerGroup(k.perGroup),
  k.perGroup === null ? "-" : k.perGroup.setBy,
  String(k.pausedGroups),
  String(k.counts.waiting),
  String(k.counts.scheduled),
  String(k.counts.running),
  String(k.counts.done),
  String(k.counts.dead),
  String(k.counts.cancelled)
]

// The counts' columns, aligned right.
const COUNTS = new Set([7, 8, 9, 10, 11, 12, 13])

const HEAD = [
  "kind", "paused", "concurrency", "rate", "set by", "per group", "group set by", "paused groups",
  "waiting", "scheduled", "running", "done", "dead", "cancelled"
]

/** The kinds as a text table (numbers right-aligned). */
export const kindTable = (kinds: ReadonlyArray<QueueRepo.KindInfo>): string =>
  table([HEAD, ...kinds.map(cell)], COUNTS)

const list = Command.make("list", { database: databaseOption, json: jsonOption }, ({ database, json }) =>
  withExistingRepo(database, (repo) => repo.listKinds).pipe(
    Effect.flatMap((kinds) =>
      Console.log(json ? JSON.stringify(kinds) : kinds.length === 0 ? "no kinds yet" : kindTable(kinds))
    )
  )).pipe(
    Command.withDescription(
      "Lists every kind with items or controls: paused, global concurrency and rate, who set them " +
        "(code: a handler's declaration; person: docket kind set), its per-group limits " +
        "(concurrency,ordered,rate,failure:continue,dead:hold) and who set them, its paused groups, and its items by state."
    )
  )

const pause = Command.make("pause", { database: databaseOption, kind: kindArg }, ({ database, kind }) =>
  withExistingRepo(database, (repo) => repo.pauseKind(kind)).pipe(
    Effect.zipRight(Console.log(`paused ${kind}: no worker starts its items (running ones finish; enqueues are kept)`))
  )).pipe(Command.withDescription("Pauses a kind: no worker process starts its items until it is resumed."))

const resume = Command.make("resume", { database: databaseOption, kind: kindArg }, ({ database, kind }) =>
  withExistingRepo(database, (repo) => repo.resumeKind(kind)).pipe(
    Effect.zipRight(Console.log(`resumed ${kind}`))
  )).pipe(Command.withDescription("Resumes a paused kind; idle workers start its items at once."))

// `N`, or `none` to remove the limit.
const concurrencyOption = Options.text("concurrency").pipe(
  Options.withPseudoName("<n|none>"),
  Options.withDescription("At most N items of the kind run at once across every process; none removes the limit."),
  Options.mapEffect((text) =>
    text.trim() === "none" ? Effect.succeed(null) : Either.match(readInteger("--concurrency", text, { min: 1 }), {
      onLeft: (e) => Effect.fail(refuse(e)),
      onRight: Effect.succeed
    })
  ),
  Options.optional
)

const rateOption = Options.text("rate").pipe(
  Options.withPseudoName("<n/duration|none>"),
  Options.withDescription(
    "At most N starts in any window of the duration across every process (100/1m, 20/1s); none removes it."
  ),
  Options.mapEffect((text) =>
    text.trim() === "none" ? Effect.succeed(null) : Either.match(parseRate("--rate", text), {
      onLeft: (e) => Effect.fail(refuse(e.reason)),
      onRight: Effect.succeed
    })
  ),
  Options.optional
)

// `--per-group-concurrency N|none`: at most N of one group at once.
const groupConcurrencyOption = Options.text("per-group-concurrency").pipe(
  Options.withPseudoName("<n|none>"),
  Options.withDescription(
    "At most N items of one group of the kind run at once (1 to 10000), across every process; none removes it."
  ),
  Options.mapEffect((text) =>
    text.trim() === "none"
      ? Effect.succeed(null)
      : Either.match(readInteger("--per-group-concurrency", text, { min: 1, max: V.MAX_GROUP_CONCURRENCY }), {
        onLeft: (e) => Effect.fail(refuse(e)),
        onRight: Effect.succeed
      })
  ),
  Options.optional
)

// `--per-group-rate N/DURATION|none`: at most N starts of one group per window.
const groupRateOption = Options.text("per-group-rate").pipe(
  Options.withPseudoName("<n/duration|none>"),
  Options.withDescription("At most N starts of one group in any window of the duration (10/1m); none removes it."),
  Options.mapEffect((text) =>
    text.trim() === "none" ? Effect.succeed(null) : Either.match(parseRate("--per-group-rate", text), {
      onLeft: (e) => Effect.fail(refuse(e.reason)),
      onRight: Effect.succeed
    })
  ),
  Options.optional
)

// What a person set of the group limits, as given.
const describeGroupLimits = (
  concurrency: number | null | undefined,
  rate: { readonly limit: number; readonly period: number } | null | undefined
) =>
  [
    ...(concurrency === undefined ? [] : [`per-group concurrency ${concurrency ?? "none"}`]),
    ...(rate === undefined ? [] : [`per-group rate ${rate === null ? "none" : formatRate({ limit: rate.limit, periodMs: rate.period })}`])
  ].join(", ")

const describeLimits = (k: QueueRepo.KindInfo | undefined): string => {
  if (k === undefined || (k.concurrency === null && k.rate === null)) return "no limits"
  const parts = [
    ...(k.concurrency === null ? [] : [`concurrency ${k.concurrency}`]),
    ...(k.rate === null ? [] : [`rate ${formatRate(k.rate)}`])
  ]
  return parts.join(", ")
}

const set = Command.make(
  "set",
  {
    database: databaseOption,
    kind: kindArg,
    concurrency: concurrencyOption,
    rate: rateOption,
    groupConcurrency: groupConcurrencyOption,
    groupRate: groupRateOption
  },
  ({ concurrency, database, groupConcurrency, groupRate, kind, rate }) =>
    Effect.gen(function*() {
      const global = Option.isSome(concurrency) || Option.isSome(rate)
      const perGroup = Option.isSome(groupConcurrency) || Option.isSome(groupRate)
      if (!global && !perGroup) {
        return yield* usage("give --concurrency, --rate, --per-group-concurrency or --per-group-rate")
      }
      const limits = { concurrency: Option.getOrUndefined(concurrency), rate: Option.getOrUndefined(rate) }
      const groupLimits = { concurrency: Option.getOrUndefined(groupConcurrency), rate: Option.getOrUndefined(groupRate) }
      const after = yield* withExistingRepo(database, (repo) =>
        Effect.all([
          global ? repo.setKindLimits(kind, limits) : Effect.void,
          perGroup ? repo.setGroupLimits(kind, groupLimits) : Effect.void
        ]).pipe(Effect.zipRight(repo.listKinds)))
      const said = [
        ...(global ? [describeLimits(after.find((k) => k.kind === kind))] : []),
        ...(perGroup ? [describeGroupLimits(groupLimits.concurrency, groupLimits.rate)] : [])
      ]
      yield* Console.log(
        `${kind}: ${said.join("; ")} (set by a person: worker starts keep it; ` +
          `docket kind reset ${kind} hands the limits back to its handler)`
      )
    })
).pipe(Command.withDescription(
  "Sets a kind's global or per-group limits; they win over a handler's declared ones until reset."
))

const reset = Command.make("reset", { database: databaseOption, kind: kindArg }, ({ database, kind }) =>
  withExistingRepo(database, (repo) => repo.resetKindLimits(kind)).pipe(
    Effect.zipRight(
      Console.log(`${kind}: limits handed back to its handler (none until a worker whose handler declares some starts)`)
    )
  )).pipe(Command.withDescription(
  "Removes a person's limits of a kind (global and per-group): its handler's declaration applies again."
))

/** The `kind` group on its own (its help text), without its subcommands. */
export const kindGroup = Command.make("kind").pipe(
  Command.withDescription("Kinds: list them, pause and resume them, set or reset their global limits.")
)

/** The subcommands of `kind`. */
export const kindCommands = [list, pause, resume, set, reset] as const

/** The `kind` command and its subcommands. */
export const kind = kindGroup.pipe(Command.withSubcommands(kindCommands))
