/** List dead: a page of dead items in id order, optionally of one kind. */
import { ITEM_COLUMNS } from "./columns.js"

/** PostgreSQL: $1 the kind or NULL for all, $2 the last id of the previous page (0 for the first), $3 the page size. */
export const pg = `
SELECT ${ITEM_COLUMNS} FROM docket_items
WHERE state = 'dead' AND ($1::text IS NULL OR kind = $1) AND id > $2
ORDER BY id LIMIT $3`

/** SQLite: the same parameters as `pg`, numbered ?1-?3. */
export const sqlite = `
SELECT ${ITEM_COLUMNS} FROM docket_items
WHERE state = 'dead' AND (?1 IS NULL OR kind = ?1) AND id > ?2
ORDER BY id LIMIT ?3`
