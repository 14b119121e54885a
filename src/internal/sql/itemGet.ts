/**
 * Get: one item by id, in any state. From docket_items_all: on PostgreSQL
 * done items are in docket_done (migrations/pg/0011_done_table.sql), a
 * primary-key probe in each table.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Item } from "../../Domain.js"
import { ITEM_COLUMNS } from "./columns.js"
import { type Run, texts } from "./db.js"
import { type ItemRow, toItem } from "./rows.js"

/** PostgreSQL: $1 the id. */
export const pg = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id = $1`

/** SQLite: ?1 the id. */
export const sqlite = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id = ?1`

/** The operation: the item, if the id names one (a positive safe integer: the caller checks). */
export type ItemGet = (id: number) => Effect.Effect<Option.Option<Item>, SqlError>

/** `itemGet` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): ItemGet => (id) =>
  Effect.map(run<ItemRow>(text, [id]), (rows) => Option.map(Option.fromNullable(rows[0]), toItem)))
