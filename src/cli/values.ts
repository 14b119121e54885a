/**
 * The values the command's options give, read without @effect/cli: which
 * database (and schema), integers with their bounds, the horizon threshold.
 * options.ts builds @effect/cli's option specs on these; the hot path
 * (hotArgv.ts, which parses `enqueue` and `stats` by hand) and queue.ts use
 * them directly, so neither loads @effect/cli.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Database from "../Database.js"
import type { UsageError } from "./errors.js"

/** What `databaseOption` reads: the queue's database and, on PostgreSQL, its schema. */
export interface DatabaseArgs {
  readonly url: Option.Option<string>
  readonly schema: Option.Option<string>
}

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

/** A checked value as an effect: its `UsageError` in the error channel. */
export const fromEither = <A>(either: Either.Either<A, UsageError>): Effect.Effect<A, UsageError> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

/** The bounds of `--horizon-transactions`. */
export const HORIZON_TRANSACTIONS_BOUNDS = { min: 0, max: 2_147_483_647 } as const

/** The threshold the horizon options give. */
export const horizonThreshold = (args: { readonly horizonAge: number; readonly horizonTransactions: number }) => ({
  age: args.horizonAge,
  transactions: args.horizonTransactions
})
