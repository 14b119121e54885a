/**
 * Part of the shared store suite (run from ./suite.ts on every
 * backend): the budget of attempts of an item enqueued without one (its
 * claimer decides), and the enqueuer's span context stored with each item.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option } from "effect"
import { InvalidInput } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import type { Backend } from "../support/db.js"
import { setRow, unsafe } from "../support/db.js"
import { recordingTracer } from "../support/tracing.js"
import { withRepo } from "../support/harness.js"

const Repo = QueueRepo.QueueRepo
const lease = "30 seconds"

const getItem = (id: number) =>
  Effect.flatMap(Repo, (repo) => repo.get(id)).pipe(Effect.map(Option.getOrThrow))

/** The stored columns behind an item's budget (what workers before migration 0005 read). */
const storedBudget = (id: number) =>
  unsafe<{ max_attempts: number | string; max_attempts_given: boolean | number }>(
    `SELECT max_attempts, max_attempts_given FROM docket_items WHERE id = ${Number(id)}`
  ).pipe(Effect.map((rows) => ({ maxAttempts: Number(rows[0].max_attempts), given: Boolean(rows[0].max_attempts_given) })))

/** What the tests below share: a fresh migrated database for each (`run`). */
const context = (backend: Backend) => {
  const run = <A, E>(program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>) => withRepo(backend, program)
  return { run }
}

const maxAttemptsNotGiven = (backend: Backend) => {
  const { run } = context(backend)
  describe("max attempts not given at enqueue", () => {
    it.live("a claim's budget: the enqueue's, else the kind's in maxAttemptsByKind, else the default", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const a = yield* repo.enqueue("a", 1)
        const b = yield* repo.enqueue("b", 2)
        const c = yield* repo.enqueue("c", 3, { maxAttempts: 5 })
        expect([(yield* getItem(a.id)).maxAttempts, (yield* getItem(c.id)).maxAttempts]).toEqual([null, 5])
        // Stored for workers before 0005: the old default, 8, when not given.
        expect(yield* storedBudget(a.id)).toEqual({ maxAttempts: QueueRepo.DEFAULT_MAX_ATTEMPTS, given: false })
        expect(yield* storedBudget(c.id)).toEqual({ maxAttempts: 5, given: true })
        const claims = yield* repo.claim({
          worker: "w",
          limit: 10,
          lease,
          maxAttemptsByKind: new Map([["a", 3], ["c", 9]])
        })
        expect(claims.map((x) => [x.id, x.maxAttempts])).toEqual([[a.id, 3], [b.id, QueueRepo.DEFAULT_MAX_ATTEMPTS], [c.id, 5]])
      })))

    it.live("a default budget is the claim's: spent, a Retry is dead; past the stored 8 when the kind's allows", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const budgets = new Map([["short", 2], ["long", 20]])
        const claimOne = (kind: string) =>
          Effect.map(repo.claim({ worker: "w", limit: 1, lease, kinds: [kind], maxAttemptsByKind: budgets }), (c) => c[0])
        const short = yield* repo.enqueue("short", 1)
        yield* setRow(short.id, { attempts: 1 })
        const last = yield* claimOne("short")
        expect([last.attempt, last.maxAttempts]).toEqual([2, 2])
        expect(yield* repo.fail(last, "no", { _tag: "Retry", delay: 0 })).toBe("dead")
        expect((yield* getItem(short.id)).state).toBe("dead")

        const long = yield* repo.enqueue("long", 1)
        yield* setRow(long.id, { attempts: QueueRepo.DEFAULT_MAX_ATTEMPTS })
        const ninth = yield* claimOne("long")
        expect([ninth.attempt, ninth.maxAttempts]).toEqual([9, 20])
        expect(yield* repo.fail(ninth, "again", { _tag: "Retry", delay: 0 })).toBe("retried")
        expect((yield* getItem(long.id)).state).toBe("waiting")
        // Without the kind's budget the default applies: attempt 10 of 8 is dead.
        const [tenth] = yield* repo.claim({ worker: "w", limit: 1, lease, kinds: ["long"] })
        expect([tenth.attempt, tenth.maxAttempts]).toEqual([10, QueueRepo.DEFAULT_MAX_ATTEMPTS])
        expect(yield* repo.fail(tenth, "again", { _tag: "Retry", delay: 0 })).toBe("dead")
      })))

    it.live("a keyed retry with a default budget is absorbed by its waiting twin; spent, it is dead", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const budgets = new Map([["keyed", 20]])
        const first = yield* repo.enqueue("keyed", 1, { key: "k" })
        yield* setRow(first.id, { attempts: QueueRepo.DEFAULT_MAX_ATTEMPTS })
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease, maxAttemptsByKind: budgets })
        const twin = yield* repo.enqueue("keyed", 2, { key: "k" })
        expect(twin._tag).toBe("Enqueued")
        expect(yield* repo.fail(claim, "x", { _tag: "Retry", delay: 0 })).toBe("absorbed")
        expect(yield* repo.get(first.id)).toEqual(Option.none())

        yield* setRow(twin.id, { attempts: 19 })
        const [spent] = yield* repo.claim({ worker: "w", limit: 1, lease, maxAttemptsByKind: budgets })
        yield* repo.enqueue("keyed", 3, { key: "k" })
        expect([spent.attempt, spent.maxAttempts]).toEqual([20, 20])
        expect(yield* repo.fail(spent, "x", { _tag: "Retry", delay: 0 })).toBe("dead")
        expect((yield* getItem(twin.id)).state).toBe("dead")
      })))

    it.live("a budget in maxAttemptsByKind that is not an integer from 1 to 10,000 is InvalidInput", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("a", 1)
        for (const bad of [0, 2.5, 10_001, NaN]) {
          const error = yield* Effect.flip(repo.claim({ worker: "w", limit: 1, lease, maxAttemptsByKind: new Map([["a", bad]]) }))
          expect(error).toBeInstanceOf(InvalidInput)
          expect((error as InvalidInput).field).toBe("maxAttempts")
        }
        expect((yield* repo.stats).due).toBe(1)
      })))

    it.live("a defaultMaxAttempts that is not an integer from 1 to 10,000 is refused when the service is built", () =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(withRepo(backend, Effect.void, { defaultMaxAttempts: 0 }))
        expect(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "built").toMatch(/QueueRepo: defaultMaxAttempts/)
      }))
  })
}

const enqueuerSpanContext = (backend: Backend) => {
  const { run } = context(backend)
  describe("the enqueuer's span context", () => {
    it.live("outside an application's tracer nothing is stored", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const one = yield* repo.enqueue("a", 1)
        const many = yield* repo.enqueueMany([{ kind: "a", payload: 2 }, { kind: "a", payload: 3, key: "k" }])
        for (const r of [one, ...many]) expect((yield* getItem(r.id)).traceContext).toBeNull()
        const claims = yield* repo.claim({ worker: "w", limit: 10, lease })
        expect(claims.map((c) => c.traceContext)).toEqual([null, null, null])
      })))

    it.live("under an application's tracer each item stores its enqueue span's context; the claim carries it", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { made, tracer } = recordingTracer()
        const traced = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.withTracer(effect, tracer)
        const contextOf = (name: string, nth = 0) => {
          const span = made.filter((s) => s.name === name)[nth]
          expect(span, name).toBeDefined()
          return `00-${span.traceId}-${span.spanId}-01`
        }
        // Each statement path: one item, one keyed item, an unkeyed batch, a keyed batch.
        const one = yield* traced(repo.enqueue("a", 1))
        const keyed = yield* traced(repo.enqueue("a", 2, { key: "k1" }))
        const plain = yield* traced(repo.enqueueMany([{ kind: "a", payload: 3 }, { kind: "b", payload: 4 }]))
        const keyedMany = yield* traced(repo.enqueueMany([{ kind: "a", payload: 5, key: "k2" }, { kind: "a", payload: 6 }]))
        const want = new Map([
          [one.id, contextOf("docket.enqueue", 0)],
          [keyed.id, contextOf("docket.enqueue", 1)],
          ...plain.map((r) => [r.id, contextOf("docket.enqueueMany", 0)] as const),
          ...keyedMany.map((r) => [r.id, contextOf("docket.enqueueMany", 1)] as const)
        ])
        expect(new Set(want.values()).size).toBe(4)
        for (const [id, context] of want) {
          expect(context).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
          expect((yield* getItem(id)).traceContext).toBe(context)
        }
        const claims = yield* repo.claim({ worker: "w", limit: 10, lease })
        expect(claims).toHaveLength(6)
        for (const claim of claims) expect(claim.traceContext).toBe(want.get(claim.id))
        // A deduplicated enqueue changes nothing stored.
        const again = yield* traced(repo.enqueue("a", 7, { key: "k3" }))
        const dup = yield* traced(repo.enqueue("a", 8, { key: "k3" }))
        expect(dup).toEqual({ _tag: "Deduplicated", id: again.id })
        expect((yield* getItem(again.id)).traceContext).toBe(contextOf("docket.enqueue", 2))
        // A claim that asks for no trace context (a pool that makes no spans)
        // reads none, through the general claim and a grouped kind's; the
        // items keep theirs.
        const plainItem = yield* traced(repo.enqueue("q", 9))
        const groupedItem = yield* traced(repo.enqueue("q", 10, { group: "g1" }))
        const untraced = yield* repo.claim({ worker: "w", limit: 10, lease, kinds: ["q"], traceContext: false })
        expect(untraced.map((c) => c.id).sort((x, y) => x - y)).toEqual([plainItem.id, groupedItem.id])
        expect(untraced.map((c) => c.traceContext)).toEqual([null, null])
        for (const { id } of [plainItem, groupedItem]) {
          expect((yield* getItem(id)).traceContext).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
        }
      })))
  })
}

export const attemptsSuite = (backend: Backend) => {
  maxAttemptsNotGiven(backend)
  enqueuerSpanContext(backend)
}
