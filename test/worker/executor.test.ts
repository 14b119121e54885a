/**
 * The executor (src/internal/worker/executor.ts) on a real SQLite file: one
 * item's run from its claim to its outcome, written by a real recorder and
 * read back from the stored item.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Schema } from "effect"
import * as Backoff from "../../src/Backoff.js"
import type { Claim } from "../../src/Domain.js"
import * as Handler from "../../src/Handler.js"
import { Budget } from "../../src/internal/worker/bounded.js"
import * as Executor from "../../src/internal/worker/executor.js"
import * as Handlers from "../../src/internal/worker/handlers.js"
import * as Recorder from "../../src/internal/worker/recorder.js"
import { PoolState, type Running } from "../../src/internal/worker/state.js"
import { MAX_DELAY_MS } from "../../src/internal/validate.js"
import { Cancel, Retry, Snooze } from "../../src/Outcome.js"
import { cleanup, freshRepo, makePublisher, row, runOf } from "../support/worker.js"

afterAll(cleanup)

/** An executor over a fresh SQLite file with these handlers, its outcomes written by a real recorder. */
const setup = (handlers: ReadonlyArray<Handler.Any>) =>
  Effect.gen(function*() {
    const { repo, sql } = yield* freshRepo
    const state = new PoolState(new Map())
    const publisher = yield* makePublisher(state)
    const recorder = yield* Recorder.make({ repo, counts: state.counts, publisher, wake: () => {}, pollMs: 2000, checkIdle: () => {} })
    yield* recorder.start(yield* Effect.scope)
    const ended: Array<Running> = []
    const executor = yield* Executor.make({
      worker: "w1",
      handlers: Handlers.table(handlers, Context.empty(), repo.maxResultBytes),
      counts: state.counts,
      publisher,
      recorder,
      traced: false,
      repo,
      leaseMs: 30_000,
      transactions: yield* Effect.makeSemaphore(4),
      finished: (entry) => {
        state.end(entry)
        ended.push(entry)
      }
    })
    /** Enqueues one item, claims it, and runs it (as `claim` makes it); its outcome is then queued. */
    const runItem = (kind: string, payload: unknown, claim: (c: Claim) => Claim = (c) => c) =>
      Effect.gen(function*() {
        yield* repo.enqueue(kind, payload)
        const [claimed] = yield* repo.claim({ worker: "w1", limit: 1, lease: "1 minute" })
        const entry = state.begin(claim(claimed), runOf(claimed, 0).slot, performance.now() + 60_000)
        yield* executor.run(entry)
        return { claimed, entry }
      })
    /** Writes every outcome queued (the recorder's stop). */
    const flush = recorder.stop(new Budget(10_000))
    return { repo, sql, state, executor, ended, runItem, flush }
  })

const item = (repo: { readonly get: (id: number) => Effect.Effect<unknown, unknown> }, id: number) =>
  Effect.map(repo.get(id), (o) => (o as { value: Record<string, unknown> }).value)

describe("the executor", () => {
  it.scoped("a run that returns is done, its value kept by the result Schema; the slot is freed once its outcome is queued", () =>
    Effect.gen(function*() {
      const Sum = Handler.make("sum", {
        payload: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
        result: Schema.Struct({ sum: Schema.Number }),
        run: ({ a, b }) => Effect.succeed({ sum: a + b })
      })
      const t = yield* setup([Sum])
      const { claimed, entry } = yield* t.runItem("sum", { a: 1, b: 2 })
      expect(t.ended).toEqual([entry])
      expect(t.state.running.size).toBe(0)
      yield* t.flush
      expect(yield* item(t.repo, claimed.id)).toMatchObject({ state: "done", result: { sum: 3 } })
      expect(t.state.counts.completed).toBe(1)
    }))

  it.scoped("a value the result Schema cannot encode makes the item dead (ResultInvalid), not retried: the work has run", () =>
    Effect.gen(function*() {
      const Bad = Handler.make("bad", {
        payload: Schema.Unknown,
        result: Schema.Struct({ n: Schema.Number }),
        run: () => Effect.succeed({ n: "one" } as unknown as { n: number })
      })
      const t = yield* setup([Bad])
      const { claimed } = yield* t.runItem("bad", {})
      yield* t.flush
      const stored = yield* item(t.repo, claimed.id)
      expect(stored.state).toBe("dead")
      expect(String(stored.lastError)).toMatch(/^ResultInvalid: the result does not match the result schema of bad/)
    }))

  it.scoped("dead before its handler runs: a kind with no handler, attempts spent by lost leases, a payload that does not decode", () =>
    Effect.gen(function*() {
      let runs = 0
      const Mail = Handler.make("mail", { payload: Schema.Struct({ to: Schema.String }), run: () => Effect.sync(() => void runs++) })
      const t = yield* setup([Mail])
      const unknown = yield* t.runItem("other", {})
      const spent = yield* t.runItem("mail", { to: "a" }, (c) => ({ ...c, attempt: c.maxAttempts + 1, lastError: "boom" }))
      const undecodable = yield* t.runItem("mail", { to: 5 })
      yield* t.flush
      expect(runs).toBe(0)
      expect(yield* item(t.repo, unknown.claimed.id)).toMatchObject({
        state: "dead",
        lastError: "UnknownKind: no handler for kind other"
      })
      const lease = yield* item(t.repo, spent.claimed.id)
      expect(lease.state).toBe("dead")
      expect(String(lease.lastError)).toMatch(/^LeaseExpired: attempt \d+ of \d+; earlier runs lost their lease .*; last error: boom$/)
      const decode = yield* item(t.repo, undecodable.claimed.id)
      expect(decode.state).toBe("dead")
      expect(String(decode.lastError)).toMatch(/^DecodeError: /)
      expect(t.state.counts.dead).toBe(3)
    }))

  it.scoped("a retry waits for its own delay, or else the kind's backoff; at the last attempt it is dead", () =>
    Effect.gen(function*() {
      const Later = Handler.make("later", {
        payload: Schema.Unknown,
        run: () => Effect.fail(new Retry({ reason: "busy", delay: "1 hour" }))
      })
      const Backed = Handler.make("backed", {
        payload: Schema.Unknown,
        backoff: Backoff.constant("2 hours"),
        run: () => Effect.fail(new Error("flaky"))
      })
      const Once = Handler.make("once", { payload: Schema.Unknown, run: () => Effect.fail(new Error("flaky")) })
      const t = yield* setup([Later, Backed, Once])
      const before = Date.now()
      const later = yield* t.runItem("later", {})
      const backed = yield* t.runItem("backed", {})
      const once = yield* t.runItem("once", {}, (c) => ({ ...c, attempt: c.maxAttempts }))
      yield* t.flush
      const hour = 3_600_000
      const l = yield* item(t.repo, later.claimed.id)
      expect(l).toMatchObject({ state: "waiting", attempts: 1, lastError: "Retry: busy" })
      expect(Number(l.runAt) - before).toBeGreaterThan(hour - 60_000)
      expect(Number(l.runAt) - before).toBeLessThan(hour + 60_000)
      const b = yield* item(t.repo, backed.claimed.id)
      expect(b).toMatchObject({ state: "waiting", lastError: "Error: flaky" })
      expect(Number(b.runAt) - before).toBeGreaterThan(2 * hour - 60_000)
      expect(Number(b.runAt) - before).toBeLessThan(2 * hour + 60_000)
      expect(yield* item(t.repo, once.claimed.id)).toMatchObject({ state: "dead", lastError: "Error: flaky" })
      expect(t.state.counts).toMatchObject({ retried: 2, dead: 1 })
    }))

  it.scoped("a snooze waits, the attempt not counted, within the kind's cap; past it the item is dead (SnoozeLimit)", () =>
    Effect.gen(function*() {
      const Poll = Handler.make("poll", {
        payload: Schema.Unknown,
        maxSnoozes: 1,
        run: () => Effect.fail(new Snooze({ delay: 0, reason: "not ready" }))
      })
      const t = yield* setup([Poll])
      const first = yield* t.runItem("poll", {})
      yield* t.flush
      expect(yield* item(t.repo, first.claimed.id)).toMatchObject({ state: "waiting", attempts: 0, snoozes: 1 })
      expect(t.state.counts.snoozed).toBe(1)
      // The next run's claim carries one snooze: the cap is reached.
      const t2 = yield* setup([Poll])
      const again = yield* t2.runItem("poll", {}, (c) => ({ ...c, snoozes: 1 }))
      yield* t2.flush
      expect(yield* item(t2.repo, again.claimed.id)).toMatchObject({
        state: "dead",
        lastError: "SnoozeLimit: snoozed 1 times (maxSnoozes 1); the last: Snooze: not ready"
      })
    }))

  it.scopedLive("the handler's Cancel is final whatever attempts remain; a run over the kind's timeout is retried as Timeout", () =>
    Effect.gen(function*() {
      const Unwanted = Handler.make("unwanted", { payload: Schema.Unknown, run: () => Effect.fail(new Cancel({ reason: "gone" })) })
      const Slow = Handler.make("slow", { payload: Schema.Unknown, timeout: "10 millis", run: () => Effect.never })
      const t = yield* setup([Unwanted, Slow])
      const cancelled = yield* t.runItem("unwanted", {})
      const slow = yield* t.runItem("slow", {})
      yield* t.flush
      expect(yield* item(t.repo, cancelled.claimed.id)).toMatchObject({ state: "cancelled", lastError: "Cancel: gone" })
      expect(yield* item(t.repo, slow.claimed.id)).toMatchObject({
        state: "waiting",
        attempts: 1,
        lastError: "Timeout: the handler ran longer than 10ms"
      })
      expect(t.state.counts).toMatchObject({ cancelled: 1, retried: 1 })
    }))

  it.scoped("a run cut off by shutdown gives its item back (attempt not counted); one whose lease was lost records nothing", () =>
    Effect.gen(function*() {
      const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })
      const t = yield* setup([Ok])
      yield* t.repo.enqueueMany([{ kind: "ok", payload: 1 }, { kind: "ok", payload: 2 }, { kind: "ok", payload: 3 }])
      const [a, b, c] = yield* t.repo.claim({ worker: "w1", limit: 3, lease: "1 minute" })
      const cut = t.state.begin(a, runOf(a, 0).slot, 0)
      yield* t.executor.interrupted(cut)
      const lost = t.state.begin(b, runOf(b, 0).slot, 0)
      lost.lost = true
      yield* t.executor.interrupted(lost)
      // A claim whose lease may be gone before it could start: not started, nothing written.
      yield* t.executor.notStarted(c)
      yield* t.flush
      expect(t.ended).toEqual([cut, lost])
      expect(yield* item(t.repo, a.id)).toMatchObject({ state: "waiting", attempts: 0 })
      expect((yield* row(t.sql, b.id)).state).toBe("running")
      expect((yield* row(t.sql, c.id)).state).toBe("running")
      expect(t.state.counts).toMatchObject({ released: 1, leaseLost: 2, completed: 0 })
    }))
  it.scoped("a backoff past what the storage keeps (about 100 years, or infinite) waits that long: it never refuses the batch of failures it is written with", () =>
    Effect.gen(function*() {
      const Forever = Handler.make("forever", {
        payload: Schema.Unknown,
        backoff: Backoff.constant(Duration.infinity),
        run: () => Effect.fail(new Error("flaky"))
      })
      const Centuries = Handler.make("centuries", {
        payload: Schema.Unknown,
        backoff: Backoff.constant(Duration.weeks(30_000)), // about 575 years
        run: () => Effect.fail(new Error("flaky"))
      })
      const Once = Handler.make("plain", { payload: Schema.Unknown, backoff: Backoff.constant("1 hour"), run: () => Effect.fail(new Error("flaky")) })
      const t = yield* setup([Forever, Centuries, Once])
      const before = Date.now()
      const forever = yield* t.runItem("forever", {})
      const centuries = yield* t.runItem("centuries", {})
      const plain = yield* t.runItem("plain", {})
      yield* t.flush
      for (const id of [forever.claimed.id, centuries.claimed.id]) {
        const i = yield* item(t.repo, id)
        expect(i).toMatchObject({ state: "waiting", attempts: 1, lastError: "Error: flaky" })
        expect(Number(i.runAt) - before).toBeGreaterThan(MAX_DELAY_MS - 60_000)
      }
      // Written in the same batch, not held back by the others.
      expect(yield* item(t.repo, plain.claimed.id)).toMatchObject({ state: "waiting", attempts: 1 })
      expect(t.state.counts).toMatchObject({ retried: 3 })
    }))
})
