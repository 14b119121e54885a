/**
 * The running items holding given (kind, key) pairs: those an enqueue with
 * `onConflict` "replaceRunning" cancels (internal/store/enqueue.ts). Read
 * through docket_items_running_key (migrations/pg/0001_items.sql, and SQLite's), so its cost follows
 * the running items of those keys, not the queue.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import { op } from "./db.js"
import type { KeyRow } from "./rows.js"

/** The operation: the running items holding these (kind, key) pairs. */
export type ItemFindRunning = (pairs: ReadonlyArray<readonly [string, string]>) => Effect.Effect<ReadonlyArray<KeyRow>, SqlError>

/** PostgreSQL: $1 the kinds, $2 the keys, pairwise. */
export const pg = `
SELECT i.id, i.kind, i.dedupe_key FROM docket_items i
JOIN unnest($1::text[], $2::text[]) AS p(kind, dedupe_key) ON i.kind = p.kind AND i.dedupe_key = p.dedupe_key
WHERE i.state = 'running' AND i.dedupe_key IS NOT NULL`

/** SQLite: ?1 a JSON array of [kind, key] pairs. */
export const sqlite = `
SELECT i.id, i.kind, i.dedupe_key FROM docket_items i
JOIN json_each(?1) p ON i.kind = p.value ->> 0 AND i.dedupe_key = p.value ->> 1
WHERE i.state = 'running' AND i.dedupe_key IS NOT NULL`

/** `itemFindRunning` for a dialect. */
export const make = op<ItemFindRunning>({
  pg: ({ run }) => (pairs) => run<KeyRow>(pg, [pairs.map((p) => p[0]), pairs.map((p) => p[1])]),
  sqlite: ({ run }) => (pairs) => run<KeyRow>(sqlite, [JSON.stringify(pairs)])
})
