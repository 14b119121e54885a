/**
 * The recurring schedules (docket_schedules, migration 0008): reading them
 * with the database's now, adding one, the compare-and-set that advances a
 * schedule past its due ticks (the item inserts run in the same transaction:
 * internal/store/schedules.ts), a declaration's compare-and-set, and the touch
 * that keeps a declared schedule live. Every time is the database's clock.
 */
import * as Now from "./clock.js"

const COLUMNS = "s.name, s.kind, s.cron, s.tz, s.payload, s.missed, s.next_tick, s.last_tick, s.last_item_id, " +
  "s.declared_at, s.created_at, s.updated_at"

// One row always (the now), joined to the schedules named (all when the
// names are NULL), each with its last item's state (NULL when the item is
// gone): the now and the rows come from one snapshot.
/** PostgreSQL: $1 names (text[]) or NULL for every schedule. */
export const pgRead = `
SELECT n.now_ms, ${COLUMNS}, i.state AS last_item_state
FROM (SELECT ${Now.pg} AS now_ms) n
LEFT JOIN docket_schedules s ON ($1::text[] IS NULL OR s.name = ANY($1::text[]))
LEFT JOIN docket_items_all i ON i.id = s.last_item_id`

/** SQLite: ?1 names (a JSON array) or NULL. */
export const sqliteRead = `
SELECT n.now_ms, ${COLUMNS}, i.state AS last_item_state
FROM (SELECT ${Now.sqlite} AS now_ms) n
LEFT JOIN docket_schedules s ON (?1 IS NULL OR s.name IN (SELECT value FROM json_each(?1)))
LEFT JOIN docket_items_all i ON i.id = s.last_item_id`

/**
 * PostgreSQL: adds a schedule unless one of its name exists (then nothing;
 * the caller reads it again). $1 name, $2 kind, $3 cron, $4 tz, $5 payload,
 * $6 missed, $7 next tick.
 */
export const pgInsert = `
INSERT INTO docket_schedules (name, kind, cron, tz, payload, missed, next_tick, declared_at, created_at, updated_at)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, ${Now.pg}, ${Now.pg}, ${Now.pg})
ON CONFLICT (name) DO NOTHING
RETURNING name`

/** SQLite: as `pgInsert`, ?1-?7. */
export const sqliteInsert = `
INSERT INTO docket_schedules (name, kind, cron, tz, payload, missed, next_tick, declared_at, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ${Now.sqlite}, ${Now.sqlite}, ${Now.sqlite})
ON CONFLICT (name) DO NOTHING
RETURNING name`

/**
 * PostgreSQL, a tick: the compare-and-set. Moves next_tick from $2 (what the
 * caller read) to $3 and records $4 as the last tick; no row comes back when
 * next_tick is no longer $2 (another pool took these ticks, or a declaration
 * changed the expression). Returns the row's kind and payload as they are
 * under the row's lock: the items are the current declaration's.
 */
export const pgAdvance = `
UPDATE docket_schedules SET next_tick = $3::bigint, last_tick = $4::bigint, declared_at = ${Now.pg}, updated_at = ${Now.pg}
WHERE name = $1::text AND next_tick = $2::bigint
RETURNING kind, payload`

/** SQLite: as `pgAdvance`, ?1-?4. */
export const sqliteAdvance = `
UPDATE docket_schedules SET next_tick = ?3, last_tick = ?4, declared_at = ${Now.sqlite}, updated_at = ${Now.sqlite}
WHERE name = ?1 AND next_tick = ?2
RETURNING kind, payload`

/**
 * PostgreSQL, a declaration: the compare-and-set on both next_tick ($8) and
 * declared_at ($9) as read, so that of two pools starting after a stop only
 * one enqueues the missed ticks. $1 name, $2 kind, $3 cron, $4 tz, $5
 * payload, $6 missed, $7 the new next tick, $10 the last tick enqueued by it
 * (NULL: keep the stored one).
 */
export const pgRedeclare = `
UPDATE docket_schedules SET kind = $2::text, cron = $3::text, tz = $4::text, payload = $5::text, missed = $6::text,
  next_tick = $7::bigint, last_tick = coalesce($10::bigint, last_tick), declared_at = ${Now.pg}, updated_at = ${Now.pg}
WHERE name = $1::text AND next_tick = $8::bigint AND declared_at = $9::bigint
RETURNING kind, payload`

/** SQLite: as `pgRedeclare`, ?1-?10. */
export const sqliteRedeclare = `
UPDATE docket_schedules SET kind = ?2, cron = ?3, tz = ?4, payload = ?5, missed = ?6,
  next_tick = ?7, last_tick = coalesce(?10, last_tick), declared_at = ${Now.sqlite}, updated_at = ${Now.sqlite}
WHERE name = ?1 AND next_tick = ?8 AND declared_at = ?9
RETURNING kind, payload`

/** PostgreSQL: $1 name, $2 the last tick's item (in the transaction of its compare-and-set). */
export const pgLastItem = `UPDATE docket_schedules SET last_item_id = $2::bigint WHERE name = $1::text`

/** SQLite: ?1 name, ?2 item. */
export const sqliteLastItem = `UPDATE docket_schedules SET last_item_id = ?2 WHERE name = ?1`

/** PostgreSQL: $1 names (text[]): a declaring pool is alive (every 5 s). */
export const pgTouch = `UPDATE docket_schedules SET declared_at = ${Now.pg} WHERE name = ANY($1::text[])`

/** SQLite: ?1 names (a JSON array). */
export const sqliteTouch = `UPDATE docket_schedules SET declared_at = ${Now.sqlite} WHERE name IN (SELECT value FROM json_each(?1))`
