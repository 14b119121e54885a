/**
 * The options several commands share (--database, --json, --kind) and the
 * reading of option values: durations and the database URL. A value that does
 * not read fails with a `UsageError` (exit 2) before anything is opened.
 */
import { Options } from "@effect/cli"
import { Effect, Either, Option } from "effect"
import * as Database from "../Database.js"
import type { UsageError } from "./errors.js"
import { parseDuration } from "./input.js"

/** `--database` / `-d`: the queue's database (see `databaseUrl` for the default). */
export const databaseOption = Options.text("database").pipe(
  Options.withAlias("d"),
  Options.withDescription(
    "The queue's database: a postgres:// or postgresql:// URL, or a SQLite file path " +
      "(default: $DOCKET_DATABASE_URL, else ./docket.db)."
  ),
  Options.optional
)

/** The database URL: the option, else DOCKET_DATABASE_URL, else ./docket.db. */
export const databaseUrl = (option: Option.Option<string>): string =>
  Option.getOrElse(option, () => {
    const env = process.env.DOCKET_DATABASE_URL
    return env !== undefined && env.trim() !== "" ? env.trim() : Database.DEFAULT_URL
  })

/** `--json`: JSON output instead of text. */
export const jsonOption = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of text."))

/** An optional text option with its help line. */
export const optionalText = (name: string, description: string) =>
  Options.text(name).pipe(Options.withDescription(description), Options.optional)

/** An optional integer option with its help line. */
export const optionalInteger = (name: string, description: string) =>
  Options.integer(name).pipe(Options.withDescription(description), Options.optional)

/** `--kind`, with the help line of the command that takes it. */
export const kindOption = (description: string) => optionalText("kind", description)

/** A checked value as an effect: its `UsageError` in the error channel. */
export const fromEither = <A>(either: Either.Either<A, UsageError>): Effect.Effect<A, UsageError> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

/** An optional duration option in milliseconds (undefined when not given). */
export const optionalDuration = (name: string, option: Option.Option<string>) =>
  Option.match(option, {
    onNone: () => Effect.succeed(undefined),
    onSome: (text) => fromEither(parseDuration(name, text))
  })
