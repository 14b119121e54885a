/**
 * Part of the runtime suite (run from ./suite.ts on SQLite and PostgreSQL):
 * a worker pool keeps what its handlers return (a `result` Schema's encoding,
 * a plain function's JSON value), makes an item whose result cannot be kept
 * dead at once, and prunes while it drains without losing or doubling an item.
 */
import type { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Schedule, Schema, type Scope } from "effect"
import { Docket, Handler, QueueRepo, Worker } from "../../../src/index.js"
import { type Backend, countAll, countState, repoLayer } from "../../support/db.js"
import { HOSTILE } from "../../store/history.js"

const item = (id: number) => Effect.map(Effect.flatMap(QueueRepo.QueueRepo, (r) => r.get(id)), Option.getOrThrow)

/** As the harness's withPool, with the repository's options (retention, result limit). */
const withPoolAndRepo = <A, E>(
  backend: Backend,
  options: Worker.Options,
  repoOptions: QueueRepo.Options,
  body: Effect.Effect<A, E, QueueRepo.QueueRepo | Worker.Worker | Scope.Scope | SqlClient.SqlClient>
) =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(() => backend.fresh())
    return yield* Effect.scoped(Effect.provide(body, Worker.layer(options).pipe(Layer.provideMerge(repoLayer(url, repoOptions)))))
  }).pipe(Effect.timeout("60 seconds"))

/** Waits until `condition` holds (an observable state, polled, bounded; no fixed sleep). */
const until = <E, R>(what: string, condition: Effect.Effect<boolean, E, R>) =>
  condition.pipe(
    Effect.filterOrFail((ok) => ok, () => `not yet: ${what}`),
    Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("30 seconds")))
  )

const resultsInThePool = (backend: Backend) => {
  it.live("a result Schema's encoding is kept with the done item; a plain function's JSON value as it is", () => {
    const Typed = Handler.make("typed.result", {
      payload: Schema.Struct({ n: Schema.Number }),
      result: Schema.Struct({ at: Schema.Date, text: Schema.String, n: Schema.Number }),
      run: ({ n }) => Effect.succeed({ at: new Date(86_400_000), text: HOSTILE[n], n })
    })
    const Plain = Handler.fromPromise("plain.result", async (payload) => {
      const n = payload as number
      return n === 0 ? undefined : n === 1 ? { list: [...HOSTILE.slice(0, 5)], ok: true } : HOSTILE[n]
    })
    return withPoolAndRepo(backend, { handlers: [Typed, Plain] }, {}, Effect.gen(function*() {
      const typed = yield* Docket.client(Typed).enqueueMany(HOSTILE.map((_, n) => ({ payload: { n } })))
      const plain = yield* Docket.client(Plain).enqueueMany([0, 1, 2, 3].map((payload) => ({ payload })))
      const worker = yield* Worker.Worker
      yield* until("all done", Effect.map(worker.counters, (c) => c.completed === HOSTILE.length + 4))
      for (const [n, r] of typed.entries()) {
        expect(yield* item(r.id)).toMatchObject({
          state: "done",
          result: { at: "1970-01-02T00:00:00.000Z", text: HOSTILE[n], n }
        })
      }
      expect((yield* item(plain[0].id)).result).toBeNull()
      expect((yield* item(plain[1].id)).result).toEqual({ list: HOSTILE.slice(0, 5), ok: true })
      expect((yield* item(plain[2].id)).result).toBe(HOSTILE[2])
      expect((yield* item(plain[3].id)).result).toBe(HOSTILE[3])
    }))
  })

  it.live("a result that is too large or does not encode is dead at once, attempts left or not, with a clear error", () => {
    const Big = Handler.make("big.result", {
      payload: Schema.Number,
      result: Schema.String,
      run: (n) => Effect.succeed("x".repeat(n)),
      maxAttempts: 5
    })
    const Wrong = Handler.make("wrong.result", {
      payload: Schema.Unknown,
      result: Schema.Struct({ n: Schema.Number }),
      // A value the schema refuses (as code that lies about its type would return).
      run: () => Effect.succeed({ n: "one" } as unknown as { n: number })
    })
    const NotJson = Handler.fromPromise("bigint.result", async () => 10n)
    return withPoolAndRepo(backend, { handlers: [Big, Wrong, NotJson] }, { maxResultBytes: 1000 }, Effect.gen(function*() {
      const ok = yield* Docket.client(Big).enqueue(990)
      const big = yield* Docket.client(Big).enqueue(2000)
      const wrong = yield* Docket.client(Wrong).enqueue(null)
      const bigint = yield* Docket.client(NotJson).enqueue(null)
      const worker = yield* Worker.Worker
      // (whenIdle right after an enqueue may see the pool idle from before it.)
      yield* until("all four ended", Effect.map(worker.counters, (c) => c.completed + c.dead === 4))
      expect(yield* item(ok.id)).toMatchObject({ state: "done", result: "x".repeat(990) })
      expect(yield* item(big.id)).toMatchObject({
        state: "dead",
        attempts: 1,
        result: null,
        lastError: "ResultTooLarge: the result is larger than 1000 bytes as JSON"
      })
      const refused = yield* item(wrong.id)
      expect(refused).toMatchObject({ state: "dead", attempts: 1 })
      expect(refused.lastError).toMatch(/^ResultInvalid: the result does not match the result schema of wrong\.result: /)
      expect(refused.errors.map((e) => e.error)).toEqual([refused.lastError])
      expect((yield* item(bigint.id)).lastError).toMatch(/^ResultInvalid: the result is not JSON-serialisable/)
      expect(yield* worker.counters).toMatchObject({ completed: 1, dead: 3, retried: 0 })
    }))
  })
}

const retentionInThePool = (backend: Backend) => {
  it.live("Docket.layer's retention reaches the repository: done 0 deletes at complete", () => {
    const Ok = Handler.make("layer.retention", { payload: Schema.Number, run: () => Effect.void })
    return Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      yield* Effect.gen(function*() {
        const worker = yield* Worker.Worker
        const added = yield* Docket.client(Ok).enqueue(1)
        yield* until("completed", Effect.map(worker.counters, (c) => c.completed === 1))
        expect(yield* Effect.flatMap(QueueRepo.QueueRepo, (r) => r.get(added.id))).toEqual(Option.none())
      }).pipe(Effect.provide(Docket.layer({ database: url, handlers: [Ok], retention: { done: 0 } })), Effect.scoped)
    }).pipe(Effect.timeout("30 seconds"))
  })

  it.live("pruning under a running drain loses nothing: every item runs once, and enqueued = done + pruned", () => {
    const N = backend.name === "pg" ? 1500 : 3000
    const runs = new Map<number, number>()
    const Counted = Handler.make("drained", {
      payload: Schema.Number,
      run: (_, job) => Effect.sync(() => void runs.set(job.id, (runs.get(job.id) ?? 0) + 1))
    })
    // Done items are kept 1 ms and the pruner runs every 20 ms: it deletes
    // while the pool completes.
    return withPoolAndRepo(
      backend,
      { handlers: [Counted], concurrency: 20, pruneEvery: "20 millis" },
      { retention: { done: "1 millis" } },
      Effect.gen(function*() {
        const worker = yield* Worker.Worker
        const added = yield* Docket.client(Counted).enqueueMany(Array.from({ length: N }, (_, i) => ({ payload: i })))
        // While it drains: what is stored plus what was pruned never exceeds what was enqueued.
        let prunedMidway = false
        yield* until("drained", Effect.gen(function*() {
          const c = yield* worker.counters
          const stored = yield* countAll
          expect(stored + c.pruned).toBeLessThanOrEqual(N)
          if (c.pruned > 0 && c.completed < N) prunedMidway = true
          return c.completed === N
        }))
        yield* worker.whenIdle
        yield* until("every done item pruned", Effect.map(worker.counters, (c) => c.pruned === N))
        expect(added.map((a) => runs.get(a.id))).toEqual(added.map(() => 1))
        expect(runs.size).toBe(N)
        const c = yield* worker.counters
        expect(c).toMatchObject({ completed: N, retried: 0, dead: 0, stale: 0, pruned: N })
        expect(yield* countState("done")).toBe(0)
        expect(yield* countAll).toBe(0)
        console.log(`history drain (${backend.name}): ${N} items, pruned during the drain: ${prunedMidway}`)
      })
    )
  }, 90_000)
}

export const historyRuntimeSuite = (backend: Backend) => {
  describe("history in the pool", () => {
    resultsInThePool(backend)
    retentionInThePool(backend)
  })
}
