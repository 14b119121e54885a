/**
 * The PostgreSQL channel enqueues (and retries of dead items) notify, and idle
 * worker pools listen on. Notifications are sent with `pg_notify` inside the
 * enqueue's own statement, so they are delivered when its transaction commits.
 */
export const NOTIFY_CHANNEL = "docket_items"
