/**
 * Batching without waiting, for the engine: its small transactions
 * committed together (`make`), and requests answered many at once
 * (`coalesce`: executions started, runs' starts read).
 *
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
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import type { Unit } from "../sql/db.js"

/** Most units in one transaction. */
const BATCH = 200

/**
 * Runs `unit` in a transaction shared with the units asked for at about the
 * same time. `single`: the unit is one statement (atomic by itself), so when
 * no other unit goes with it, it runs without BEGIN and COMMIT (two round
 * trips fewer on the way of a caller waiting alone).
 */
export type Batched = <A, E>(unit: Effect.Effect<A, E>, options?: { readonly single?: boolean }) => Effect.Effect<A, E | SqlError>

interface Pending {
  readonly unit: Effect.Effect<unknown, unknown>
  readonly done: Deferred.Deferred<unknown, unknown>
  readonly single: boolean
}

/**
 * Forks a writer in `scope` without its caller's transaction or span: a
 * forked fiber inherits its parent's context, so a writer forked by a caller
 * inside a transaction of its own would run every later caller's writes in
 * that transaction (after its commit, on a connection given back).
 */
export const forkWriter = (writer: Effect.Effect<void>, scope: Scope.Scope) =>
  Effect.forkIn(
    Effect.mapInputContext(writer, (context: Context.Context<never>) =>
      Context.omit(SqlClient.TransactionConnection, Tracer.ParentSpan)(context) as Context.Context<never>),
    scope
  )

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
    const together = batch.length === 1 && batch[0].single
      ? Effect.map(batch[0].unit, (value) => [value])
      : transaction(Effect.forEach(batch, (p) => p.unit))
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
  return <A, E>(unit: Effect.Effect<A, E>, options?: { readonly single?: boolean }) =>
    // The push and the fork together, not interrupted between them: a flag set with no writer
    // forked would leave every later unit waiting.
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<unknown, unknown>()
        // The caller's span stays the parent of the unit's (an enqueue's span links its item's runs).
        const span = yield* Effect.serviceOption(Tracer.ParentSpan)
        pending.push({
          unit: Option.isSome(span) ? Effect.withParentSpan(unit, span.value) : unit,
          done,
          single: options?.single === true
        })
        if (!writing) {
          writing = true
          yield* forkWriter(writeAll, scope)
        }
        return (yield* restore(Deferred.await(done))) as A
      })
    ) as Effect.Effect<A, E | SqlError>
}

/** One request answered together with the requests asked for at about the same time. */
export type Coalesced<K, V, E = SqlError> = (key: K) => Effect.Effect<V, E>

interface Asked<K, V, E> {
  readonly key: K
  readonly done: Deferred.Deferred<V, E>
}

/**
 * Requests answered many at once by `many` (its answers in the requests'
 * order), its fiber in `scope`: the first request is sent at once, and those
 * asked for while it is in flight go together in the next (at most `most`),
 * as the writers batch. When `many` fails for several, each is asked again
 * alone: a request fails only by its own failure.
 */
export const coalesce = <K, V, E>(
  many: (keys: ReadonlyArray<K>) => Effect.Effect<ReadonlyArray<V>, E>,
  scope: Scope.Scope,
  most = BATCH
): Coalesced<K, V, E> => {
  const pending: Array<Asked<K, V, E>> = []
  let sending = false
  const sendAll: Effect.Effect<void> = Effect.suspend(() => {
    const batch = pending.splice(0, most)
    if (batch.length === 0) {
      sending = false
      return Effect.void
    }
    // A failure of a batch of more than one: each request again alone, so one request's
    // failure is its own and no other's (as `make` does).
    const alone = ({ done, key }: Asked<K, V, E>) =>
      Effect.flatMap(Effect.exit(many([key])), (exit) => Deferred.done(done, Exit.map(exit, (values) => values[0])))
    return Effect.exit(many(batch.map((a) => a.key))).pipe(
      Effect.flatMap((exit) =>
        Exit.isSuccess(exit)
          ? Effect.forEach(batch, ({ done }, i) => Deferred.succeed(done, exit.value[i]), { discard: true })
          : batch.length === 1
          ? Deferred.failCause(batch[0].done, exit.cause)
          : Effect.forEach(batch, alone, { discard: true })
      ),
      Effect.zipRight(sendAll)
    )
  })
  return (key) =>
    // The push and the fork together, not interrupted between them (see `make`).
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<V, E>()
        pending.push({ key, done })
        if (!sending) {
          sending = true
          yield* forkWriter(sendAll, scope)
        }
        return yield* restore(Deferred.await(done))
      })
    )
}

/** Reads one key's value (undefined: none) together with the reads asked for at about the same time. */
export type Read<K, V> = Coalesced<K, V | undefined>

/** The reads of `readMany` (one statement for many keys), coalesced: see `coalesce`. */
export const reader = <K, V>(
  readMany: (keys: ReadonlyArray<K>) => Effect.Effect<ReadonlyMap<K, V>, SqlError>,
  scope: Scope.Scope,
  most = BATCH
): Read<K, V> =>
  coalesce((keys: ReadonlyArray<K>) => Effect.map(readMany(keys), (found) => keys.map((key) => found.get(key))), scope, most)
