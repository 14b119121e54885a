/**
 * What every storage operation (internal/sql/<operation>.ts) runs on: `Db`,
 * one SQL dialect's statement runner over a `SqlClient`, built once with the
 * storage (internal/storage.ts); and `op`, which declares an operation once
 * per dialect and picks the dialect's form once, when the storage is built,
 * never per call. Every statement is a constant text with positional
 * parameters ($N on PostgreSQL, ?N on SQLite): no input is ever spliced into SQL.
 *
 * PostgreSQL batches travel as parallel arrays expanded with `unnest`, SQLite
 * batches as one JSON array expanded with `json_each`: one statement text (one
 * prepared statement) serves any batch size. SQLite has one writer at a time:
 * every multi-statement operation starts with a write, so its transaction
 * holds the write lock from its first statement (a deferred transaction that
 * reads first could fail to upgrade).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { Cursors } from "./claimCursors.js"
import * as DirectPool from "../directPool.js"
import * as PgSchema from "../pgSchema.js"
import * as Transaction from "../transaction.js"

/** Runs one constant text with positional parameters. */
export type Run = <A extends object>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>

/** Runs `effect` as one unit of work. */
export type Unit = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>

/** One dialect's runner over a `SqlClient`. */
export interface Db {
  readonly dialect: "pg" | "sqlite"
  /** The client (a claim reserves a connection of it: sql/claimAcquire.ts). */
  readonly sql: SqlClient
  readonly run: Run
  /** Runs `effect` in one transaction (joining the caller's, if any); a failed COMMIT fails typed (transaction.ts). */
  readonly transaction: Unit
  /**
   * Runs an enqueue's insert and dedupe look-up as one unit where the dialect
   * needs it (SQLite: one transaction, so the look-up sees what the insert
   * skipped); PostgreSQL runs them as they are and retries a lost race.
   */
  readonly atomic: Unit
  readonly isUniqueViolation: (error: SqlError) => boolean
  /** PostgreSQL: the scope a reserved claim connection is held in (sql/claimAcquire.ts); none on SQLite. */
  readonly claimScope: Scope.Scope | undefined
  /** PostgreSQL: the claims' cursors (sql/claimCursors.ts), one set per storage; none on SQLite. */
  readonly cursors: Cursors | undefined
  /**
   * A text as it runs: on PostgreSQL Docket's objects and channels those of the
   * schema (pgSchema.ts; `run` applies it to every text); as it is on SQLite
   * and in `public`. For a statement sent past `run` (sql/claimAcquire.ts).
   */
  readonly qualify: (text: string) => string
}

/**
 * An operation declared once per dialect: the function built for `db`'s
 * dialect, chosen here, once, when the storage is built.
 */
export const op = <F>(forms: { readonly pg: (db: Db) => F; readonly sqlite: (db: Db) => F }) => (db: Db): F =>
  forms[db.dialect](db)

/** An operation whose dialects differ only in their texts: `bind` runs the dialect's. */
export const texts = <T, F>(pg: T, sqlite: T, bind: (run: Run, text: T) => F) =>
  op({ pg: (db) => bind(db.run, pg), sqlite: (db) => bind(db.run, sqlite) })

/**
 * An array of integers (or nulls) as a PostgreSQL array literal. The driver's
 * own array encoding quotes and escapes every element, which cost 5% of a
 * drain's allocations; these values are checked integers, so a join is exact.
 */
export const intArray = (values: ReadonlyArray<number | null>): string => {
  let text = "{"
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (v !== null && !Number.isSafeInteger(v)) throw new Error(`intArray: ${v} is not an integer`)
    text += (i === 0 ? "" : ",") + (v === null ? "NULL" : String(v))
  }
  return text + "}"
}

/** SQLite: fences ({ id, token }) as one JSON array of [id, token] pairs. */
export const fencesJson = (fences: ReadonlyArray<{ readonly id: number; readonly token: number }>) =>
  JSON.stringify(fences.map((f) => [f.id, f.token]))

const pgCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/**
 * The PostgreSQL runner: through the direct pool when Docket built the client
 * (directPool.ts), else `sql.unsafe`; every text qualified by the schema
 * (pgSchema.ts: memoized, and not wrapped at all in `public`).
 */
export const pg = (
  sql: SqlClient,
  claimScope?: Scope.Scope,
  pool?: DirectPool.Service,
  schema: PgSchema.PgSchema = PgSchema.publicSchema
): Db => ({
  dialect: "pg",
  sql,
  run: qualified(
    pool === undefined || pool.client !== sql
      ? <A extends object>(text: string, params: ReadonlyArray<unknown>) => sql.unsafe<A>(text, params)
      : DirectPool.runner(sql, pool),
    schema
  ),
  // A COMMIT lost with its connection fails typed, not as a defect (transaction.ts).
  transaction: Transaction.typed(sql),
  atomic: (effect) => effect,
  isUniqueViolation: (error) => pgCode(error.cause) === "23505",
  claimScope,
  cursors: new Cursors(),
  qualify: schema.qualify
})

const qualified = (run: Run, schema: PgSchema.PgSchema): Run =>
  schema.isPublic ? run : <A extends object>(text: string, params: ReadonlyArray<unknown>) =>
    run<A>(schema.qualify(text), params)

// better-sqlite3 binds numbered parameters (?1) by name, not by position: each
// statement is rewritten once to plain ? marks with the matching parameter list.
const cache = new Map<string, { readonly text: string; readonly order: ReadonlyArray<number> }>()
const compile = (text: string) => {
  let entry = cache.get(text)
  if (entry === undefined) {
    const order: Array<number> = []
    const rewritten = text.replace(/\?(\d+)/g, (_, n: string) => {
      order.push(Number(n) - 1)
      return "?"
    })
    entry = { text: rewritten, order }
    cache.set(text, entry)
  }
  return entry
}

/** SQLite: a statement's text and parameters as better-sqlite3 takes them. */
export const compiled = (text: string, params: ReadonlyArray<unknown>) => {
  const { order, text: rewritten } = compile(text)
  return { text: rewritten, params: order.map((i) => params[i]) }
}

/** The SQLite runner. */
export const sqlite = (sql: SqlClient): Db => {
  const transaction = Transaction.typed(sql)
  return {
    dialect: "sqlite",
    sql,
    run: <A extends object>(text: string, params: ReadonlyArray<unknown>) => {
      const c = compiled(text, params)
      return sql.unsafe<A>(c.text, c.params)
    },
    transaction,
    atomic: transaction,
    isUniqueViolation: (error) => {
      const cause = error.cause
      return typeof cause === "object" && cause !== null && "code" in cause &&
        (cause.code === "SQLITE_CONSTRAINT_UNIQUE" || cause.code === "SQLITE_CONSTRAINT_PRIMARYKEY")
    },
    claimScope: undefined,
    cursors: undefined,
    qualify: (text) => text
  }
}

/**
 * The runner of the `SqlClient`'s dialect (PostgreSQL or SQLite; anything
 * else is refused). Given a scope, PostgreSQL claims run on a connection
 * reserved until it closes (sql/claimAcquire.ts). PostgreSQL statements name
 * the objects of the schema in context (`Database.Options.schema`, else public).
 */
export const make = (sql: SqlClient, claimScope?: Scope.Scope): Effect.Effect<Db> =>
  Effect.zipWith(Effect.serviceOption(DirectPool.DirectPool), PgSchema.current, (direct, schema) =>
    sql.onDialectOrElse({
      pg: () => pg(sql, claimScope, Option.getOrUndefined(direct), schema),
      sqlite: () => sqlite(sql),
      orElse: () => {
        throw new Error("Docket supports PostgreSQL and SQLite only")
      }
    }))

/** Two statements' rows, in one transaction (SQLite's absorb-then-update pairs). */
export const bothInOne = <A>(
  db: Db,
  first: Effect.Effect<ReadonlyArray<A>, SqlError>,
  second: Effect.Effect<ReadonlyArray<A>, SqlError>
): Effect.Effect<ReadonlyArray<A>, SqlError> => db.transaction(Effect.zipWith(first, second, (a, b) => [...a, ...b]))
