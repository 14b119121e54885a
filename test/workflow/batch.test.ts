/**
 * The engine's batching reader (batch.ts `reader`): the runs' starts read
 * together. The first read goes at once; those asked for while it is in
 * flight go together in the next statement; each gets its own key's value
 * (undefined for a key the statement did not find); a failed statement fails
 * each of its reads and no other's.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Batch from "../../src/internal/workflow/batch.js"

describe("the engine's batching reader", () => {
  it.scoped("reads asked for while one is in flight go together; each gets its own value", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const statements: Array<ReadonlyArray<string>> = []
      const gate = yield* Deferred.make<void>()
      const read = Batch.reader((keys: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          statements.push(keys)
          if (statements.length === 1) yield* Deferred.await(gate)
          return new Map(keys.filter((k) => k !== "missing").map((k) => [k, `value of ${k}`]))
        }), scope)
      const first = yield* Effect.fork(read("a"))
      yield* Effect.yieldNow()
      const rest = yield* Effect.fork(Effect.all(["b", "missing", "c"].map(read), { concurrency: "unbounded" }))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe("value of a")
      expect(yield* Fiber.join(rest)).toEqual(["value of b", undefined, "value of c"])
      expect(statements).toEqual([["a"], ["b", "missing", "c"]])
    }))

  it.scoped("a failed statement fails its own reads, not the next ones", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      let calls = 0
      const read = Batch.reader((keys: ReadonlyArray<string>) =>
        ++calls === 1
          ? Effect.fail(new SqlError({ message: "the first statement fails" }))
          : Effect.succeed(new Map(keys.map((k) => [k, k.toUpperCase()]))), scope)
      const failed = yield* Effect.exit(read("x"))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(yield* read("y")).toBe("Y")
    }))

  it.scoped("a single-statement unit alone runs outside a transaction; units together share one", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      // The transaction as the batcher is given it: here it marks what ran inside it.
      let transactions = 0
      const inTransaction = FiberRef.unsafeMake(false)
      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.suspend(() => {
          transactions++
          return Effect.locally(effect, inTransaction, true)
        })
      const batched = Batch.make(transaction, scope)
      const where = FiberRef.get(inTransaction)
      expect(yield* batched(where, { single: true })).toBe(false)
      expect(yield* batched(where)).toBe(true)
      expect(transactions).toBe(1)
      const gate = yield* Deferred.make<void>()
      const first = yield* Effect.fork(batched(Effect.zipRight(Deferred.await(gate), where), { single: true }))
      yield* Effect.yieldNow()
      const others = yield* Effect.fork(Effect.all([batched(where, { single: true }), batched(where, { single: true })], {
        concurrency: "unbounded"
      }))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe(false)
      expect(yield* Fiber.join(others)).toEqual([true, true])
      expect(transactions).toBe(2)
    }))
})
