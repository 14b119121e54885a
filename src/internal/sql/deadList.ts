/** List dead: a page of dead items in id order, optionally of one kind. */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Item } from "../../Domain.js"
import { ITEM_COLUMNS } from "./columns.js"
import { type Run, texts } from "./db.js"
import { type ItemRow, toItems } from "./rows.js"

/** The operation: dead items of `kind` (null for all) with ids above `afterId`, at most `limit`. */
export type DeadList = (kind: string | null, afterId: number, limit: number) => Effect.Effect<ReadonlyArray<Item>, SqlError>

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

/** `deadList` for a dialect. */
export const make = texts(pg, sqlite, (run: Run, text): DeadList => (kind, afterId, limit) =>
  Effect.map(run<ItemRow>(text, [kind, afterId, limit]), toItems))
