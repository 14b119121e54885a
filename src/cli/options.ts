/**
 * The options several commands share (--database, --json, --kind) and typed
 * option specs: integers, durations and times read while @effect/cli parses
 * the command line. A value that does not read fails there, with a message
 * that names the flag (exit 2, before anything is opened).
 *
 * Integers are `Options.text` with our own reading rather than
 * `Options.integer`: @effect/cli's integer says `'high' is not a integer`
 * without the flag, and an `Options` has no way to change a primitive's
 * message; `Options.mapEffect` is its hook for reading a value.
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Horizon from "../internal/horizon.js"
import * as PgSchema from "../internal/pgSchema.js"
import type { UsageError } from "./errors.js"
import { parseDuration, parseTime, readPeriod } from "./input.js"
import { type DatabaseArgs, HORIZON_TRANSACTIONS_BOUNDS, readInteger } from "./values.js"

export {
  type DatabaseArgs,
  databaseOptions,
  databaseUrl,
  fromEither,
  horizonThreshold,
  listenDatabaseUrl,
  readInteger,
  schemaName
} from "./values.js"

/** `--schema`: PostgreSQL's schema for Docket's objects, checked while the command line is parsed. */
export const schemaOption = Options.text("schema").pipe(
  Options.withPseudoName("<name>"),
  Options.withDescription(
    "PostgreSQL: the schema Docket's tables, functions and channels live in (a plain lower-case identifier). " +
      "Default: $DOCKET_SCHEMA, else public."
  ),
  Options.mapEffect((text) =>
    Either.match(PgSchema.check(text), {
      onLeft: (error) => Effect.fail(refuse(`--schema: ${error.reason}`)),
      onRight: Effect.succeed
    })
  ),
  Options.optional
)

/**
 * `--database` / `-d` and `--schema`: the queue's database (see `databaseUrl`
 * for the default) and its schema (`databaseOptions`), on every command that
 * opens it.
 */
export const databaseOption: Options.Options<DatabaseArgs> = Options.all({
  url: Options.text("database").pipe(
    Options.withAlias("d"),
    Options.withPseudoName("<url>"),
    Options.withDescription(
      "The queue's database: a postgres:// or postgresql:// URL, or a SQLite file path. " +
        "Default: $DOCKET_DATABASE_URL, else ./docket.db."
    ),
    Options.optional
  ),
  schema: schemaOption
})

/** `--json`: JSON output instead of text. */
export const jsonOption = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of text."))

/** A text option with its help line and the name of its value in the usage (`--key <key>`). */
export const textOption = (name: string, value: string, description: string) =>
  Options.text(name).pipe(Options.withPseudoName(`<${value}>`), Options.withDescription(description))

/** An optional text option. */
export const optionalText = (name: string, value: string, description: string) =>
  textOption(name, value, description).pipe(Options.optional)

/** `--kind`, with the help line of the command that takes it. */
export const kindOption = (description: string) => optionalText("kind", "kind", description)

/** A refused value, as @effect/cli's parser reports it (one line, exit 2). */
export const refuse = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

const fromReading = <A>(either: Either.Either<A, UsageError | string>) =>
  Either.match(either, {
    onLeft: (e) => Effect.fail(refuse(typeof e === "string" ? e : e.reason)),
    onRight: Effect.succeed
  })

/** An integer option (`--concurrency <integer>`), read and bounded while the command line is parsed. */
export const integerOption = (
  name: string,
  description: string,
  bounds: { readonly min?: number; readonly max?: number } = {}
) =>
  Options.text(name).pipe(
    Options.withPseudoName("<integer>"),
    Options.withDescription(description),
    Options.mapEffect((text) => fromReading(readInteger(`--${name}`, text, bounds)))
  )

/** A duration option in milliseconds (`--lease <duration>`: 500ms, 30s, 5m, 1h or milliseconds). */
export const durationOption = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("<duration>"),
    Options.withDescription(description),
    Options.mapEffect((text) => fromReading(parseDuration(`--${name}`, text)))
  )

/** An ISO 8601 time option (`--run-at <time>`). */
export const timeOption = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("<time>"),
    Options.withDescription(description),
    Options.mapEffect((text) => fromReading(parseTime(`--${name}`, text)))
  )

/** The option with a default, said in its help (`Default: 10.`). */
export const withDefault = <A>(value: A, shown: string = String(value)) => (self: Options.Options<A>) =>
  self.pipe(Options.withDescription(`Default: ${shown}.`), Options.withDefault(value))

/**
 * `--horizon-age` and `--horizon-transactions`: when a holder of PostgreSQL's
 * xmin horizon is reported (`QueueRepo.horizon`'s threshold; the defaults and
 * why in internal/horizon.ts). Read together as a `HorizonThreshold` in ms.
 */
export const horizonOptions = {
  horizonAge: durationOption(
    "horizon-age",
    "PostgreSQL: a session's transaction, or a prepared transaction, open longer than this holds vacuum back " +
      "(reported with who holds it)."
  ).pipe(withDefault(Horizon.DEFAULT_AGE_MS, readPeriod(Horizon.DEFAULT_AGE_MS))),
  horizonTransactions: integerOption(
    "horizon-transactions",
    "PostgreSQL: a replication slot or a standby's feedback whose xmin is more than this many transactions old " +
      "holds vacuum back (they record no time).",
    HORIZON_TRANSACTIONS_BOUNDS
  ).pipe(withDefault(Horizon.DEFAULT_TRANSACTIONS))
}
