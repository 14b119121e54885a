/**
 * Waiting for an execution's result (`execute` without `discard`), pushed,
 * not polled: a caller takes a ticket for the execution before it reads the
 * execution's row, so a completion between the read and the wait is not
 * missed, and the ticket is punched by
 * - a completion in this process (the run that stored the result), which
 *   hands the stored result over with the punch, so the caller decodes it
 *   without reading the row again;
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
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { listen } from "../listen.js"
import { remoteTarget } from "../remoteTarget.js"
import * as SqliteWatch from "../sqliteWatch.js"
import { forkWriter } from "./batch.js"

/** How long a waiter waits for a push before it reads the row again. */
export const FALLBACK_MS = 10_000

/** The waiters of one engine. */
export interface Waiters {
  /**
   * Runs `store`, the storing of an execution's result in this process (the
   * text stored, or undefined when another run's was), then punches its
   * tickets with that text. Meanwhile pushes of the execution from the
   * database (its notification, a SQLite sweep) are not passed on: they are
   * this completion's own, and would make the callers read what is handed
   * to them.
   */
  readonly completing: <E>(executionId: string, store: Effect.Effect<string | undefined, E>) => Effect.Effect<void, E>
  /**
   * A ticket for `executionId`, for the scope: `wait` returns when it is
   * punched (or at once if it was since the last wait), or after `ms`; with
   * the stored result when a completion in this process handed it over.
   */
  readonly ticket: (executionId: string) => Effect.Effect<Ticket, never, Scope.Scope>
}

/** A caller's wait for one execution's result. */
export interface Ticket {
  readonly wait: (ms: number) => Effect.Effect<string | undefined>
}

class Punchable implements Ticket {
  punched = false
  /** The stored result, once a completion in this process handed it over (it stays: a result is final). */
  result: string | undefined
  private wake: (() => void) | undefined
  punch = (result?: string) => {
    if (result !== undefined) this.result = result
    this.punched = true
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }
  wait = (ms: number) =>
    Effect.async<string | undefined>((resume) => {
      if (this.punched) {
        this.punched = false
        return resume(Effect.succeed(this.result))
      }
      const timer = setTimeout(() => {
        this.wake = undefined
        resume(Effect.succeed(this.result))
      }, ms)
      this.wake = () => {
        clearTimeout(timer)
        this.punched = false
        resume(Effect.succeed(this.result))
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
    const tickets = new Map<string, Set<Punchable>>()
    const one = (executionId: string, result?: string) => {
      const set = tickets.get(executionId)
      if (set !== undefined) for (const ticket of set) ticket.punch(result)
    }
    // Executions whose result this process is storing (a count: a run retried may overlap its own end).
    const local = new Map<string, number>()
    const pushed = (executionId: string) => {
      if (!local.has(executionId)) one(executionId)
    }
    let sweeping = false
    let again = false
    const sweep: Effect.Effect<void> = Effect.suspend(() => {
      again = false
      const ids = [...tickets.keys()]
      const chunks = Array.from({ length: Math.ceil(ids.length / SWEEP_CHUNK) }, (_, i) =>
        ids.slice(i * SWEEP_CHUNK, (i + 1) * SWEEP_CHUNK))
      return Effect.forEach(chunks, (chunk) => Effect.map(completed(chunk), (done) => done.forEach(pushed)), { discard: true })
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
      // Forked clean of the first caller's transaction and span (batch.ts `forkWriter`).
      return Effect.asVoid(forkWriter(remote.value(pushed, all), scope))
    })
    return {
      completing: (executionId, store) =>
        Effect.suspend(() => {
          local.set(executionId, (local.get(executionId) ?? 0) + 1)
          return Effect.onExit(store, (exit) =>
            Effect.sync(() => {
              const n = local.get(executionId)! - 1
              if (n === 0) local.delete(executionId)
              else local.set(executionId, n)
              one(executionId, Exit.isSuccess(exit) ? exit.value : undefined)
            }))
        }),
      ticket: (executionId) =>
        Effect.zipRight(
          start,
          Effect.acquireRelease(
            Effect.sync(() => {
              const ticket = new Punchable()
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
