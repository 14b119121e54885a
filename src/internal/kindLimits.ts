/**
 * Setting a kind's limits, the same steps on both dialects (each passes its
 * statement texts, its boolean encoding, its runner and its transaction):
 * the row written (a person's, a handler's declaration, or a reset), then,
 * if it changed, the kind's rate slots brought to its limit, all in one
 * transaction. The first statement writes, so on SQLite the transaction holds
 * the write lock from it.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { Dialect } from "./dialect.js"

/** One dialect's statements for `setLimits` (sql/kinds.ts). */
export interface Texts {
  readonly reset: string
  readonly setByPerson: string
  readonly declare: string
  readonly dropSlots: string
  readonly addSlots: string
}

type Run = <A extends object>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>
type Transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>

/** The dialect's `setLimits`. */
export const setter = (texts: Texts, flag: (b: boolean) => unknown, run: Run, transaction: Transaction): Dialect["setLimits"] =>
(kind, limits, by) =>
  transaction(Effect.gen(function*() {
    const params = [kind, limits.concurrency, limits.rateLimit, limits.ratePeriodMs]
    const changed = yield* (by === "reset"
      ? run<{ kind: string }>(texts.reset, [kind])
      : by === "person"
      ? run<{ kind: string }>(texts.setByPerson, [
        ...params,
        flag(limits.keepConcurrency === true),
        flag(limits.keepRate === true)
      ])
      : run<{ kind: string }>(texts.declare, params))
    if (changed.length === 0) return false
    yield* run(texts.dropSlots, [kind])
    yield* run(texts.addSlots, [kind])
    return true
  }))
