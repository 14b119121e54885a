/**
 * The live-workers table (docket_workers, migration 0006): a pool's heartbeat
 * (its registration is the first one), its removal at a graceful stop, the
 * removal of pools long silent, and the listing. Every time is the database's
 * clock (./clock.ts), so hosts with skewed clocks agree on which pool is gone.
 */
import * as Now from "./clock.js"

const COLUMNS = "id, name, host, pid, kinds, concurrency, running, version, started_at, heartbeat_at"

/**
 * PostgreSQL heartbeat: $1 id, $2 name, $3 host, $4 pid, $5 kinds (JSON text
 * or NULL), $6 concurrency, $7 running, $8 version, $9 the start time of an
 * earlier heartbeat or NULL. Inserts the row (the first heartbeat, or the row
 * was removed meanwhile: it comes back with its start time when the pool
 * knows it, else now), or renews its running count and heartbeat time.
 */
export const pgHeartbeat = `
INSERT INTO docket_workers (${COLUMNS})
VALUES ($1::text, $2::text, $3::text, $4::integer, $5::text, $6::integer, $7::integer, $8::text,
  coalesce($9::bigint, ${Now.pg}), ${Now.pg})
ON CONFLICT (id) DO UPDATE SET running = EXCLUDED.running, heartbeat_at = EXCLUDED.heartbeat_at
RETURNING started_at`

/** SQLite heartbeat: the parameters of `pgHeartbeat`, numbered ?1-?9. */
export const sqliteHeartbeat = `
INSERT INTO docket_workers (${COLUMNS})
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, coalesce(?9, ${Now.sqlite}), ${Now.sqlite})
ON CONFLICT (id) DO UPDATE SET running = excluded.running, heartbeat_at = excluded.heartbeat_at
RETURNING started_at`

/** PostgreSQL: $1 the pool's id; returns its id if it was there. */
export const pgRemove = `DELETE FROM docket_workers WHERE id = $1 RETURNING id`

/** SQLite: ?1 the pool's id. */
export const sqliteRemove = `DELETE FROM docket_workers WHERE id = ?1 RETURNING id`

/** PostgreSQL: $1 milliseconds; removes the pools silent for longer, returns their ids. */
export const pgPrune = `DELETE FROM docket_workers WHERE heartbeat_at < ${Now.pg} - $1::bigint RETURNING id`

/** SQLite: ?1 milliseconds. */
export const sqlitePrune = `DELETE FROM docket_workers WHERE heartbeat_at < ${Now.sqlite} - ?1 RETURNING id`

// The age is computed in the statement, on the database's clock: the reader's
// own clock never decides whether a pool is gone.
// (In no order: the store sorts them by code unit, the same on every dialect.)
const listSql = (now: string) => `
SELECT ${COLUMNS}, ${now} - heartbeat_at AS age_ms FROM docket_workers`

/** PostgreSQL: every pool, with its heartbeat's age in ms. */
export const pgList = listSql(Now.pg)

/** SQLite: as `pgList`. */
export const sqliteList = listSql(Now.sqlite)
