/**
 * Waiting for an execution's result (`execute` without `discard`), pushed,
 * not polled: a caller takes a ticket for the execution before it reads the
 * execution's row, so a completion between the read and the wait is not
 * missed, and the ticket is punched by
 * - a completion in this process (the run that stored the result);
 * - on PostgreSQL, the completion's notification from any process (the
 *   result's UPDATE notifies `docket_wf` with the execution id at its commit;
 *   one LISTEN connection per engine, opened for the first waiter and kept
 *   for the engine's life, through `listen`'s probe and reconnects);
 * - on a SQLite file, any commit by another process (the file watch the
 *   worker pools use): one statement reads which of the awaited executions
 *   are complete, and punches those (one sweep at a time, another after it
 *   if commits came meanwhile: the watch also sees this process's own
 *   commits, and a read per waiter per commit made a thousand waiters cost
 *   a million reads).
 * A ticket not punched within `FALLBACK_MS` returns anyway and the caller
 * reads again: the safety net for a notification lost while the LISTEN
 * connection was reconnecting, not the way results arrive.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { listen } from "../listen.js"
import { remoteTarget } from "../remoteTarget.js"
import * as SqliteWatch from "../sqliteWatch.js"

/** How long a waiter waits for a push before it reads the row again. */
export const FALLBACK_MS = 10_000

/** The waiters of one engine. */
export interface Waiters {
  /** An execution finished in this process. */
  readonly notify: (executionId: string) => void
  /**
   * A ticket for `executionId`, for the scope: `wait` returns when it is
   * punched (or at once if it was since the last wait), or after `ms`.
   */
  readonly ticket: (executionId: string) => Effect.Effect<{ readonly wait: (ms: number) => Effect.Effect<void> }, never, Scope.Scope>
}

class Ticket {
  punched = false
  private wake: (() => void) | undefined
  punch = () => {
    this.punched = true
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }
  wait = (ms: number) =>
    Effect.async<void>((resume) => {
      if (this.punched) {
        this.punched = false
        return resume(Effect.void)
      }
      const timer = setTimeout(() => {
        this.wake = undefined
        resume(Effect.void)
      }, ms)
      this.wake = () => {
        clearTimeout(timer)
        this.punched = false
        resume(Effect.void)
      }
      return Effect.sync(() => {
        clearTimeout(timer)
        this.wake = undefined
      })
    })
}

/**
 * What pushes other processes' completions, for the database in context:
 * run (in the engine's scope) with the punch of one execution and of all.
 */
type Remote = (one: (executionId: string) => void, all: () => void) => Effect.Effect<void>

const remoteFor = Effect.map(remoteTarget, (target): Option.Option<Remote> => {
  switch (target._tag) {
    case "Pg":
      return Option.some((one, all) =>
        listen(target.config, [target.schema.workflowChannel], target.probe, all, (_, payload) => one(payload)).pipe(
          Effect.catchAll((error) =>
            Effect.logWarning(`docket workflows: ${error.message}; results are read every ${FALLBACK_MS / 1000} s meanwhile`)
          ),
          Effect.zipRight(Effect.sleep("1 second")),
          Effect.forever
        )
      )
    case "Sqlite": {
      const watch = SqliteWatch.make(target.filename)
      return Option.some((_, all) => Effect.scoped(Effect.zipRight(watch.subscribe(all), Effect.never)))
    }
    case "None":
      return Option.none()
  }
})

/** How many awaited executions one sweep reads in a statement. */
const SWEEP_CHUNK = 500

/**
 * The waiters over the database in context; their push from other processes
 * runs in `scope`, from the first ticket. `completed` says which of some
 * executions are complete (a sweep's one statement).
 */
export const make = (
  scope: Scope.Scope,
  completed: (executionIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, unknown>
): Effect.Effect<Waiters, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const remote = yield* remoteFor
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const tickets = new Map<string, Set<Ticket>>()
    const one = (executionId: string) => {
      const set = tickets.get(executionId)
      if (set !== undefined) for (const ticket of set) ticket.punch()
    }
    let sweeping = false
    let again = false
    const sweep: Effect.Effect<void> = Effect.suspend(() => {
      again = false
      const ids = [...tickets.keys()]
      const chunks = Array.from({ length: Math.ceil(ids.length / SWEEP_CHUNK) }, (_, i) =>
        ids.slice(i * SWEEP_CHUNK, (i + 1) * SWEEP_CHUNK))
      return Effect.forEach(chunks, (chunk) => Effect.map(completed(chunk), (done) => done.forEach(one)), { discard: true })
    }).pipe(
      // A failed read punches every ticket: each waiter reads its own row.
      Effect.catchAll(() => Effect.sync(() => tickets.forEach((_, id) => one(id)))),
      Effect.zipRight(Effect.suspend(() => (again ? sweep : Effect.sync(() => (sweeping = false)))))
    )
    const all = () => {
      if (tickets.size === 0) return
      if (sweeping) {
        again = true
        return
      }
      sweeping = true
      runFork(Effect.forkIn(sweep, scope))
    }
    let started = false
    const start = Effect.suspend(() => {
      if (started || Option.isNone(remote)) return Effect.void
      started = true
      return Effect.asVoid(Effect.forkIn(remote.value(one, all), scope))
    })
    return {
      notify: one,
      ticket: (executionId) =>
        Effect.zipRight(
          start,
          Effect.acquireRelease(
            Effect.sync(() => {
              const ticket = new Ticket()
              let set = tickets.get(executionId)
              if (set === undefined) tickets.set(executionId, set = new Set())
              set.add(ticket)
              return ticket
            }),
            (ticket) =>
              Effect.sync(() => {
                const set = tickets.get(executionId)
                set?.delete(ticket)
                if (set?.size === 0) tickets.delete(executionId)
              })
          )
        )
    }
  })
