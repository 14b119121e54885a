/**
 * Complete: a done item is kept as 'done' for the queue's retention (its
 * result and finish time written, claimed_by kept: who ran it), or deleted at
 * once when the retention of done items is 0 (the behaviour before 0007).
 * Fenced: only a running item whose token (lease_seq) the claim presents is
 * changed; each row returned is one that was.
 *
 * Keeping the row costs an UPDATE instead of a DELETE; it does not touch the
 * claim's index (partial on waiting: the row left it at its claim), only the
 * finished index gains an entry (migrations/pg/0007_history.sql).
 */
import * as Now from "./clock.js"

/** PostgreSQL, retention 0: $1 ids, $2 tokens, pairwise. */
export const pgDelete = `
DELETE FROM docket_items i USING unnest($1::bigint[], $2::bigint[]) AS c(id, seq)
WHERE i.id = c.id AND i.lease_seq = c.seq AND i.state = 'running'
RETURNING i.id, i.lease_seq`

/**
 * PostgreSQL, kept: $1 ids, $2 tokens, $3 results (JSON text, NULL for none),
 * pairwise; $3 may be NULL for a batch without results (unnest pads it).
 */
export const pgKeep = `
UPDATE docket_items i
SET state = 'done', result = c.result, finished_at = ${Now.pg}, lease_until = NULL, updated_at = ${Now.pg}
FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS c(id, seq, result)
WHERE i.id = c.id AND i.lease_seq = c.seq AND i.state = 'running'
RETURNING i.id, i.lease_seq`

/** SQLite, retention 0: ?1 a JSON array of [id, token] pairs. */
export const sqliteDelete = `
DELETE FROM docket_items
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq`

/** SQLite, kept: ?1 a JSON array of [id, token, result (JSON text or null)] rows. */
export const sqliteKeep = `
UPDATE docket_items AS u
SET state = 'done', result = c.result, finished_at = ${Now.sqlite}, lease_until = NULL, updated_at = ${Now.sqlite}
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS seq, j.value ->> 2 AS result FROM json_each(?1) j) AS c
WHERE u.id = c.id AND u.lease_seq = c.seq AND u.state = 'running'
RETURNING id, lease_seq`
