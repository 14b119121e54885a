/**
 * The shared store suite: typed errors (InvalidInput naming the field, nothing written; StorageError).
 * Run on every backend by test/store/sqlite.test.ts and test/store/pg.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { type InvalidField } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, countState } from "../support/db.js"
import { dropTable, expectInvalid, expectStorageError, getItem, storeContext } from "../support/store.js"

const Repo = QueueRepo.QueueRepo

const inputValidation = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  describe("input validation: a typed InvalidInput, nothing written", () => {
    const bad: ReadonlyArray<readonly [string, InvalidField, (repo: QueueRepo.Service) => Effect.Effect<unknown, unknown>]> = [
      ["empty kind", "kind", (r) => r.enqueue("", {})],
      ["a kind of 129 characters", "kind", (r) => r.enqueue("k".repeat(129), {})],
      ["a kind with a space", "kind", (r) => r.enqueue("email send", {})],
      ["a kind with a quote", "kind", (r) => r.enqueue("email'send", {})],
      ["a kind that is not a string", "kind", (r) => r.enqueue(42 as unknown as string, {})],
      ["payload undefined", "payload", (r) => r.enqueue("job", undefined)],
      ["payload a function", "payload", (r) => r.enqueue("job", () => 1)],
      ["payload holding a function", "payload", (r) => r.enqueue("job", { f: () => 1 })],
      ["payload a BigInt", "payload", (r) => r.enqueue("job", 10n)],
      ["payload holding a BigInt", "payload", (r) => r.enqueue("job", { n: 10n })],
      ["payload NaN", "payload", (r) => r.enqueue("job", NaN)],
      ["payload holding Infinity", "payload", (r) => r.enqueue("job", { n: [1, Infinity] })],
      ["payload holding a symbol", "payload", (r) => r.enqueue("job", { s: Symbol("x") })],
      ["payload a cycle", "payload", (r) => {
        const cycle: Record<string, unknown> = { a: 1 }
        cycle.self = cycle
        return r.enqueue("job", cycle)
      }],
      ["payload over the size limit", "payload", (r) => r.enqueue("job", "x".repeat(100))],
      ["payload over the size limit in bytes, not characters", "payload", (r) => r.enqueue("job", "é".repeat(40))],
      ["key empty", "key", (r) => r.enqueue("job", {}, { key: "" })],
      ["key with NUL", "key", (r) => r.enqueue("job", {}, { key: "a\u0000b" })],
      ["key with a lone surrogate", "key", (r) => r.enqueue("job", {}, { key: "a\ud800b" })],
      ["key over 512 characters", "key", (r) => r.enqueue("job", {}, { key: "k".repeat(513) })],
      ["negative delay", "delay", (r) => r.enqueue("job", {}, { delay: -1 })],
      ["NaN delay", "delay", (r) => r.enqueue("job", {}, { delay: NaN })],
      ["infinite delay", "delay", (r) => r.enqueue("job", {}, { delay: Duration.infinity })],
      ["a delay that is not a duration", "delay", (r) => r.enqueue("job", {}, { delay: "soon" as never })],
      ["delay and runAt together", "delay", (r) => r.enqueue("job", {}, { delay: 10, runAt: Date.now() })],
      ["an invalid Date runAt", "runAt", (r) => r.enqueue("job", {}, { runAt: new Date("nope") })],
      ["a NaN runAt", "runAt", (r) => r.enqueue("job", {}, { runAt: NaN })],
      ["priority 1.5", "priority", (r) => r.enqueue("job", {}, { priority: 1.5 })],
      ["priority beyond int32", "priority", (r) => r.enqueue("job", {}, { priority: 2 ** 31 })],
      ["maxAttempts 0", "maxAttempts", (r) => r.enqueue("job", {}, { maxAttempts: 0 })],
      ["maxAttempts 2.5", "maxAttempts", (r) => r.enqueue("job", {}, { maxAttempts: 2.5 })],
      ["enqueueMany with one bad item among good ones", "priority", (r) =>
        r.enqueueMany([
          { kind: "job", payload: 1 },
          { kind: "job", payload: 2, key: "k" },
          { kind: "job", payload: 3, priority: 0.5 },
          { kind: "job", payload: 4 }
        ])],
      ["enqueueMany whose last item is bad", "kind", (r) =>
        r.enqueueMany([{ kind: "job", payload: 1 }, { kind: "job", payload: 2 }, { kind: "", payload: 3 }])]
    ]
    for (const [name, field, attempt] of bad) {
      it.live(`${name}: InvalidInput on ${field}`, () =>
        run(
          Effect.gen(function*() {
            const repo = yield* Repo
            yield* expectInvalid(attempt(repo), field)
            expect(yield* countAll).toBe(0)
          }),
          { maxPayloadBytes: 64 }
        ))
    }

    it.live("the size limit counts JSON bytes: a payload at the limit is accepted", () =>
      run(
        Effect.gen(function*() {
          const repo = yield* Repo
          // "é" is 2 bytes: 31 of them plus the quotes are 64 bytes.
          const added = yield* repo.enqueue("job", "é".repeat(31))
          expect((yield* getItem(added.id)).payload).toBe("é".repeat(31))
          yield* expectInvalid(repo.enqueue("job", "é".repeat(32)), "payload")
          expect(yield* countAll).toBe(1)
        }),
        { maxPayloadBytes: 64 }
      ))

    it.live("an enqueueMany error names the bad item", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const error = yield* expectInvalid(
          repo.enqueueMany([{ kind: "job", payload: 1 }, { kind: "job", payload: 2, maxAttempts: 0 }]),
          "maxAttempts"
        )
        expect(error.reason).toContain("item 1")
        expect(yield* countAll).toBe(0)
      })))

    it.live("bad claims: limit 0, lease 0, a bad worker or kind; nothing is leased", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const added = yield* repo.enqueue("job", {})
        yield* expectInvalid(repo.claim({ worker: "w", limit: 0, lease }), "limit")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1.5, lease }), "limit")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease: 0 }), "lease")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease: "0 millis" }), "lease")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease: -5 }), "lease")
        yield* expectInvalid(repo.claim({ worker: "", limit: 1, lease }), "worker")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease, kinds: ["ok", "not ok"] }), "kind")
        expect(yield* countState("running")).toBe(0)
        expect((yield* getItem(added.id)).attempts).toBe(0)
      })))

    it.live("bad fail and extend arguments change nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        const before = yield* getItem(claim.id)
        yield* expectInvalid(repo.fail(claim, "x", { _tag: "Retry", delay: -1 }), "delay")
        yield* expectInvalid(repo.fail(claim, "x", { _tag: "Retry", delay: NaN }), "delay")
        yield* expectInvalid(repo.extend(claim, 0), "lease")
        yield* expectInvalid(repo.extendMany([claim], NaN), "lease")
        expect(yield* getItem(claim.id)).toEqual(before)
      })))
  })
}

const storageErrors = (backend: Backend) => {
  const { run, lease } = storeContext(backend)
  describe("storage errors", () => {
    it.live("operations on a dropped table fail with a typed StorageError", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        yield* dropTable
        const error = yield* expectStorageError(repo.enqueue("job", {}))
        expect(error.operation).toBe("enqueue")
        yield* expectStorageError(repo.enqueueMany([{ kind: "job", payload: 1 }]))
        yield* expectStorageError(repo.claim({ worker: "w", limit: 1, lease }))
        yield* expectStorageError(repo.complete(claim))
        yield* expectStorageError(repo.fail(claim, "x", { _tag: "Retry", delay: 0 }))
        yield* expectStorageError(repo.release(claim))
        yield* expectStorageError(repo.extend(claim, lease))
        yield* expectStorageError(repo.stats)
        yield* expectStorageError(repo.get(1))
        yield* expectStorageError(repo.listDead())
        yield* expectStorageError(repo.retryDead({ all: true }))
        yield* expectStorageError(repo.deleteDead({ all: true }))
        yield* expectStorageError(repo.nextDueIn)
      })))

    it.live("input is checked before the database: bad input is InvalidInput even when storage is broken", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* dropTable
        yield* expectInvalid(repo.enqueue("", {}), "kind")
      })))
  })
}

/** Registers the errors tests for a backend. */
export const errorsSuite = (backend: Backend) => {
  inputValidation(backend)
  storageErrors(backend)
}
