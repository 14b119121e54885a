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
import * as Option from "effect/Option"
import * as Database from "../Database.js"
import * as Horizon from "../internal/horizon.js"
import * as PgSchema from "../internal/pgSchema.js"
import type { UsageError } from "./errors.js"
import { parseDuration, parseTime, readPeriod } from "./input.js"

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

/** What `databaseOption` reads: the queue's database and, on PostgreSQL, its schema. */
export interface DatabaseArgs {
  readonly url: Option.Option<string>
  readonly schema: Option.Option<string>
}

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

const fromEnv = (name: string): string | undefined => {
  const env = process.env[name]
  return env !== undefined && env.trim() !== "" ? env.trim() : undefined
}

/** The database URL: the option, else DOCKET_DATABASE_URL, else ./docket.db. */
export const databaseUrl = (args: DatabaseArgs): string =>
  Option.getOrElse(args.url, () => fromEnv("DOCKET_DATABASE_URL") ?? Database.DEFAULT_URL)

/** The schema: the option, else DOCKET_SCHEMA (checked when the database is opened), else none given (public). */
export const schemaName = (args: { readonly schema: Option.Option<string> }): string | undefined =>
  Option.getOrElse(args.schema, () => fromEnv("DOCKET_SCHEMA"))

/** The database options the arguments give (the schema). */
export const databaseOptions = (args: DatabaseArgs): Database.Options => ({ schema: schemaName(args) })

/** The LISTEN connection's own URL: the option, else DOCKET_LISTEN_DATABASE_URL, else none. */
export const listenDatabaseUrl = (option: Option.Option<string>): string | undefined =>
  Option.getOrElse(Option.map(option, (url) => url.trim()), () => process.env.DOCKET_LISTEN_DATABASE_URL?.trim()) ||
  undefined

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

const INTEGER = /^[+-]?\d+$/

/** The reading of an integer flag: whole, and within its bounds when it has them. */
export const readInteger = (
  flag: string,
  text: string,
  bounds: { readonly min?: number; readonly max?: number } = {}
): Either.Either<number, string> => {
  const trimmed = text.trim()
  const n = Number(trimmed)
  if (!INTEGER.test(trimmed) || !Number.isSafeInteger(n)) return Either.left(`${flag}: '${text}' is not an integer`)
  const { max, min } = bounds
  if (min !== undefined && max !== undefined && (n < min || n > max)) {
    return Either.left(`${flag} must be from ${min} to ${max} (got ${n})`)
  }
  if (min !== undefined && n < min) return Either.left(`${flag} must be at least ${min} (got ${n})`)
  if (max !== undefined && n > max) return Either.left(`${flag} must be at most ${max} (got ${n})`)
  return Either.right(n)
}

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

/** A checked value as an effect: its `UsageError` in the error channel. */
export const fromEither = <A>(either: Either.Either<A, UsageError>): Effect.Effect<A, UsageError> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

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
    { min: 0, max: 2_147_483_647 }
  ).pipe(withDefault(Horizon.DEFAULT_TRANSACTIONS))
}

/** The threshold the horizon options give. */
export const horizonThreshold = (args: { readonly horizonAge: number; readonly horizonTransactions: number }) => ({
  age: args.horizonAge,
  transactions: args.horizonTransactions
})
