/**
 * Get many: the items among given ids, in id order (unknown ids left out),
 * in one statement. From docket_items_all, as sql/itemGet.ts.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Item } from "../../Domain.js"
import { ITEM_COLUMNS } from "./columns.js"
import { intArray, op } from "./db.js"
import { type ItemRow, toItems } from "./rows.js"

/** PostgreSQL: $1 the ids. */
export const pg = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id = ANY($1::bigint[]) ORDER BY id`

/** SQLite: ?1 a JSON array of the ids. */
export const sqlite = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id`

/** The operation: the items among these ids (checked positive safe integers), in id order. */
export type ItemGetMany = (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<Item>, SqlError>

/** `itemGetMany` for a dialect. */
export const make = op<ItemGetMany>({
  pg: ({ run }) => (ids) => Effect.map(run<ItemRow>(pg, [intArray(ids)]), toItems),
  sqlite: ({ run }) => (ids) => Effect.map(run<ItemRow>(sqlite, [JSON.stringify(ids)]), toItems)
})
