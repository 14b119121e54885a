/**
 * The waiting items holding given (kind, key) pairs: where an enqueue's keyed
 * rows went that its insert skipped.
 */

/** PostgreSQL: $1 the kinds, $2 the keys, pairwise. */
export const pg = `
SELECT i.id, i.kind, i.dedupe_key FROM docket_items i
JOIN unnest($1::text[], $2::text[]) AS p(kind, dedupe_key) ON i.kind = p.kind AND i.dedupe_key = p.dedupe_key
WHERE i.state = 'waiting' AND i.dedupe_key IS NOT NULL`

/** SQLite: ?1 a JSON array of [kind, key] pairs. */
export const sqlite = `
SELECT i.id, i.kind, i.dedupe_key FROM docket_items i
JOIN json_each(?1) p ON i.kind = p.value ->> 0 AND i.dedupe_key = p.value ->> 1
WHERE i.state = 'waiting' AND i.dedupe_key IS NOT NULL`
