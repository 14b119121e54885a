/**
 * Get: one item by id, in any state; or several, in id order (unknown ids left
 * out). From docket_items_all: on PostgreSQL done items are in docket_done
 * (migrations/pg/0011_done_table.sql), a primary-key probe in each table.
 */
import { ITEM_COLUMNS } from "./columns.js"

/** PostgreSQL: $1 the id. */
export const pg = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id = $1`

/** SQLite: ?1 the id. */
export const sqlite = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id = ?1`

/** PostgreSQL, several: $1 the ids. */
export const pgMany = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id = ANY($1::bigint[]) ORDER BY id`

/** SQLite, several: ?1 a JSON array of the ids. */
export const sqliteMany = `SELECT ${ITEM_COLUMNS} FROM docket_items_all WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id`
