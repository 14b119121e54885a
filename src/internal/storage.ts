/**
 * The storage port: every operation the store (internal/store/) runs on the
 * database, split by area (internal/storage/<area>.ts: items, claims,
 * history, kinds, workers, schedules, insights), noun-first names, each
 * member one file of internal/sql/. Built once from the `SqlClient`: the
 * dialect is chosen then (sql/db.ts), and each operation's form for it, never
 * per call.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Db from "./sql/db.js"
import * as Claims from "./storage/claims.js"
import * as History from "./storage/history.js"
import * as Insights from "./storage/insights.js"
import * as Items from "./storage/items.js"
import * as Kinds from "./storage/kinds.js"
import * as Schedules from "./storage/schedules.js"
import * as Workers from "./storage/workers.js"

export type { Claims } from "./storage/claims.js"
export type { History } from "./storage/history.js"
export type { Insights } from "./storage/insights.js"
export type { Items } from "./storage/items.js"
export type { Kinds } from "./storage/kinds.js"
export type { Schedules } from "./storage/schedules.js"
export type { Workers } from "./storage/workers.js"

/** The units of work the store composes operations in (sql/db.ts says what each does). */
export interface Units {
  readonly dialect: "pg" | "sqlite"
  readonly transaction: Db.Unit
  readonly atomic: Db.Unit
  readonly isUniqueViolation: (error: SqlError) => boolean
}

/** Every storage operation, by area. */
export type Storage =
  & Units
  & Items.Items
  & Claims.Claims
  & History.History
  & Kinds.Kinds
  & Workers.Workers
  & Schedules.Schedules
  & Insights.Insights

/** The storage over a dialect's runner. */
export const fromDb = (db: Db.Db): Storage => ({
  dialect: db.dialect,
  transaction: db.transaction,
  atomic: db.atomic,
  isUniqueViolation: db.isUniqueViolation,
  ...Items.make(db),
  ...Claims.make(db),
  ...History.make(db),
  ...Kinds.make(db),
  ...Workers.make(db),
  ...Schedules.make(db),
  ...Insights.make(db)
})

/**
 * The storage over `sql` (PostgreSQL or SQLite). Given a scope, PostgreSQL
 * claims run on a connection reserved until it closes (sql/claimAcquire.ts).
 */
export const make = (sql: SqlClient, claimScope?: Scope.Scope): Effect.Effect<Storage> =>
  Effect.map(Db.make(sql, claimScope), fromDb)
