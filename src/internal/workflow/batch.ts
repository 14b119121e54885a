/**
 * Group commit for the engine's small transactions: a clock firing (its
 * deferred stored as a run starts, or by an item of the clock kind), a run's
 * suspend on clocks (with its next run due at the earliest) and a run's end
 * (its result stored, its parent woken). Each is a few statements and a commit, and the commit is
 * a disk flush (SQLite's `synchronous = FULL`, PostgreSQL's
 * `synchronous_commit`): 10,000 clocks due together cost 10,000 flushes.
 * Units asked for while one batch is written go together into the next, in
 * one transaction (batching without waiting, as steps.ts does for activities'
 * results). If a batch's transaction fails, each of its units runs again in a
 * transaction of its own, so one unit's failure is its own and no other's.
 * Every unit starts with a write, so on SQLite the batch holds the write lock
 * from its first statement.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import type { Unit } from "../sql/db.js"

/** Most units in one transaction. */
const BATCH = 200

/** Runs `unit` in a transaction shared with the units asked for at about the same time. */
export type Batched = <A, E>(unit: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>

interface Pending {
  readonly unit: Effect.Effect<unknown, unknown>
  readonly done: Deferred.Deferred<unknown, unknown>
}

/** The batcher over `transaction`, its writer fiber in `scope`. */
export const make = (transaction: Unit, scope: Scope.Scope): Batched => {
  const pending: Array<Pending> = []
  let writing = false
  const alone = (p: Pending) => Effect.flatMap(Effect.exit(transaction(p.unit)), (exit) => Deferred.done(p.done, exit))
  const writeAll: Effect.Effect<void> = Effect.suspend(() => {
    const batch = pending.splice(0, BATCH)
    if (batch.length === 0) {
      writing = false
      return Effect.void
    }
    const together = transaction(Effect.forEach(batch, (p) => p.unit))
    return Effect.exit(together).pipe(
      Effect.flatMap((exit) =>
        Exit.isSuccess(exit)
          ? Effect.forEach(batch, (p, i) => Deferred.succeed(p.done, exit.value[i]), { discard: true })
          : batch.length === 1
          ? Deferred.done(batch[0].done, Exit.map(exit, (values) => values[0]))
          : Effect.forEach(batch, alone, { discard: true })
      ),
      Effect.zipRight(writeAll)
    )
  })
  return <A, E>(unit: Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const done = yield* Deferred.make<unknown, unknown>()
      pending.push({ unit, done })
      if (!writing) {
        writing = true
        yield* Effect.forkIn(writeAll, scope)
      }
      return (yield* Deferred.await(done)) as A
    }) as Effect.Effect<A, E | SqlError>
}
