/** Get: one item by id, in any state. */
import { ITEM_COLUMNS } from "./columns.js"

/** PostgreSQL: $1 the id. */
export const pg = `SELECT ${ITEM_COLUMNS} FROM docket_items WHERE id = $1`

/** SQLite: ?1 the id. */
export const sqlite = `SELECT ${ITEM_COLUMNS} FROM docket_items WHERE id = ?1`
