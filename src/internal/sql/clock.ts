/**
 * The database's clock, in milliseconds since the Unix epoch, as each dialect
 * writes it. Statements read time only from here, never from the worker's
 * machine, so a worker with a skewed clock cannot take a lease early or run an
 * item before it is due.
 */

/** PostgreSQL: the statement's start time, a function of migrations/pg/0001_items.sql. */
export const pg = "docket_now_ms()"

/** SQLite: `unixepoch('subsec')` is in seconds with a fraction. */
export const sqlite = "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
