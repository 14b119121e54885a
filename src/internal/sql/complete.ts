/**
 * Complete: a done item leaves the queue. Fenced: only a running item whose
 * token (lease_seq) the claim presents is deleted; each row returned is one
 * that was.
 */

/** PostgreSQL: $1 ids, $2 tokens, pairwise. */
export const pg = `
DELETE FROM docket_items i USING unnest($1::bigint[], $2::bigint[]) AS c(id, seq)
WHERE i.id = c.id AND i.lease_seq = c.seq AND i.state = 'running'
RETURNING i.id, i.lease_seq`

/** SQLite: ?1 a JSON array of [id, token] pairs. */
export const sqlite = `
DELETE FROM docket_items
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq`
