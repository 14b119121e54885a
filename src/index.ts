/**
 * Docket: a durable work queue and worker runtime for Effect applications,
 * on SQLite (embedded default) or PostgreSQL (many processes and machines).
 *
 * Import the modules as namespaces: `import { Docket, Handler, Outcome } from "docket"`.
 * Only what these modules export is public; everything under src/internal/
 * is Docket's own and may change in any release.
 */

/** Backoff policies: how long a failed item waits before its next attempt. */
export * as Backoff from "./Backoff.js"
/** A web dashboard, a JSON API and Prometheus metrics over a queue's database. */
export * as Dashboard from "./Dashboard.js"
/** The database: a migrated `SqlClient` layer for a PostgreSQL URL or a SQLite file. */
export * as Database from "./Database.js"
/** One layer for database, queue and worker pool; typed clients; try-at-once-or-enqueue. */
export * as Docket from "./Docket.js"
/** The domain types: Claim, Item, State, Counts, EnqueueResult, ... (also reachable as `QueueRepo.Claim` etc.). */
export * as Domain from "./Domain.js"
/** The typed errors (bad input, storage, migration, database unavailable, an invalid recurring schedule). */
export * as Errors from "./Errors.js"
/** The worker pool's events and counters, for status lines, audit logs and tests. */
export * as Events from "./Events.js"
/** Handlers: how items of one kind are run (payload Schema, run, attempts, backoff, timeout). */
export * as Handler from "./Handler.js"
/** Bringing a database to the latest schema. */
export * as Migrations from "./Migrations.js"
/** The outcomes a handler can choose: `Retry`, `Permanent`, `Cancel`, `Snooze` (and the runtime's `Timeout`). */
export * as Outcome from "./Outcome.js"
/** Recurring items: schedules (cron, time zone, missed ticks) whose ticks are enqueued exactly once. */
export * as Recurring from "./Recurring.js"
/** The storage service: enqueue, claim, complete, fail, release, extend, cancel, stats, dead items, history (list, prune), schedules. */
export * as QueueRepo from "./QueueRepo.js"
/** How worker pools are woken for new items (in-process enqueues, PostgreSQL LISTEN). */
export * as Wakeups from "./Wakeups.js"
/** The worker pool as a service and a layer. */
export * as Worker from "./Worker.js"
/** The handler outcomes, also at the top level: `Effect.fail(new Retry({ reason }))`. */
export { Cancel, Permanent, Retry, Snooze, Timeout } from "./Outcome.js"
