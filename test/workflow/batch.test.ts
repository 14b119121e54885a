/**
 * The engine's batching reader (batch.ts `reader`): the runs' starts read
 * together. The first read goes at once; those asked for while it is in
 * flight go together in the next statement; each gets its own key's value
 * (undefined for a key the statement did not find); a failed statement fails
 * each of its reads and no other's.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Batch from "../../src/internal/workflow/batch.js"
import * as Engine from "../../src/internal/workflow/engine.js"
import { checkKind, KIND_MAX_LENGTH } from "../../src/internal/validate.js"

describe("the engine's batching (batch.ts)", () => {
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

  it.scoped("a writer forked by a caller inside its own transaction does not carry it to later callers", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const batched = Batch.make(<A, E, R>(effect: Effect.Effect<A, E, R>) => effect, scope)
      const seen = Effect.map(Effect.serviceOption(SqlClient.TransactionConnection), Option.isSome)
      // The first caller (it forks the writer) is inside a transaction of its own.
      const first = batched(seen).pipe(
        Effect.provideService(SqlClient.TransactionConnection, [{} as never, 0] as never)
      )
      expect(yield* first).toBe(false)
    }))

  it.scoped("when a batch of several fails, each request is asked again alone: one fails by its own failure only", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const statements: Array<ReadonlyArray<string>> = []
      const gate = yield* Deferred.make<void>()
      const ask = Batch.coalesce((keys: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          statements.push(keys)
          if (statements.length === 1) yield* Deferred.await(gate)
          if (keys.includes("poison")) return yield* Effect.fail(new SqlError({ message: "poison" }))
          return keys.map((k) => k.toUpperCase())
        }), scope)
      const first = yield* Effect.fork(ask("a"))
      yield* Effect.yieldNow()
      const rest = yield* Effect.fork(Effect.all(["b", "poison", "c"].map((k) => Effect.either(ask(k))), { concurrency: "unbounded" }))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe("A")
      const [b, poison, c] = yield* Fiber.join(rest)
      expect(b).toEqual(Either.right("B"))
      expect(Either.isLeft(poison)).toBe(true)
      expect(c).toEqual(Either.right("C"))
      expect(statements).toEqual([["a"], ["b", "poison", "c"], ["b"], ["poison"], ["c"]])
    }))
})

describe("a workflow's kind", () => {
  it("is its name under workflow: while that fits a kind; a longer or odd name gets a digest, within 128 characters", () => {
    expect(Engine.kindOf("Signup")).toBe("workflow:Signup")
    expect(Engine.kindOf("a".repeat(119))).toBe(`workflow:${"a".repeat(119)}`)
    for (const name of ["a".repeat(120), "b".repeat(200), "c d ".repeat(100), "é".repeat(300)]) {
      const kind = Engine.kindOf(name)
      expect(kind.length).toBeLessThanOrEqual(KIND_MAX_LENGTH)
      expect(Either.isRight(checkKind(kind))).toBe(true)
    }
    expect(Engine.kindOf("a".repeat(120))).not.toBe(Engine.kindOf(`${"a".repeat(120)}x`))
  })
})
