/**
 * Docket: a durable work queue and worker runtime for Effect applications,
 * on SQLite (embedded default) or PostgreSQL (many processes and machines).
 *
 * Import the modules as namespaces: `import { Docket, Handler, Outcome } from "docket"`.
 */
export * as Backoff from "./Backoff.js"
export * as Database from "./Database.js"
export * as Docket from "./Docket.js"
export * as Errors from "./Errors.js"
export * as Events from "./Events.js"
export * as Handler from "./Handler.js"
export * as Migrations from "./Migrations.js"
export * as Outcome from "./Outcome.js"
export * as QueueRepo from "./QueueRepo.js"
export * as Worker from "./Worker.js"
export { Cancel, Permanent, Retry, Timeout } from "./Outcome.js"
