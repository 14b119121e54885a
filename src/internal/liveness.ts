/**
 * The timing of the live-workers table (docket_workers, migration 0006): how
 * often a pool heartbeats, when a silent pool is shown as gone, and when it is
 * removed. Shared by the pool (worker/registry.ts), the store (a row's status)
 * and the command (`docket workers`, `docket stats`).
 */

/**
 * The default heartbeat. One heartbeat is one upsert of one small row plus a
 * delete that nearly always removes nothing: every 5 s that is noise beside a
 * pool's claims and lease renewals, even on SQLite's single writer, and a
 * killed pool is shown as gone within about 15 s.
 */
export const HEARTBEAT_DEFAULT_MS = 5_000

/** The shortest heartbeat (for tests): shorter would only load the database. */
export const HEARTBEAT_MIN_MS = 50

/**
 * The longest heartbeat. Whoever reads the table judges "gone" by one fixed
 * age (the table records no interval per pool), so no pool may beat more
 * slowly than a third of it: a live pool is never shown as gone before it
 * missed three heartbeats.
 */
export const HEARTBEAT_MAX_MS = 5_000

/** A pool silent this long (three heartbeats at the longest interval) is shown as gone. */
export const GONE_AFTER_MS = 3 * HEARTBEAT_MAX_MS

/**
 * A pool silent this long is removed by the next heartbeat of any other pool.
 * An hour: long enough for a person to see in `docket workers` which pool
 * died (and where: host, pid), short enough that a fleet which restarts often
 * does not pile up rows.
 */
export const REMOVE_AFTER_MS = 3_600_000
