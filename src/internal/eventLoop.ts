/**
 * A turn of Node's event loop. better-sqlite3 is synchronous: a pool draining
 * a SQLite backlog would never give the event loop a turn (timers, signals,
 * IPC, lease renewals all stall). A macrotask once per batch (a claim, an
 * outcome write) keeps them running at little cost; once per item cut a
 * drain to ~590 jobs/s.
 */
import * as Effect from "effect/Effect"

/** Resumes after one turn of the event loop (a macrotask). */
export const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})
