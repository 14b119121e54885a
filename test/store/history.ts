/**
 * Part of the shared store suite (run from ./suite.ts on every
 * backend): the history of finished items (migration 0007). Results and
 * attempt errors round-trip exactly, hostile text included; retention keeps
 * what is younger and prunes what is older (time moved by setting rows'
 * finished_at, never by sleeping); a retried dead item keeps its history;
 * `list` pages through every item exactly once with its cursor; bad input is
 * a typed InvalidInput that changes nothing.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import * as Database from "../../src/Database.js"
import { InvalidInput, type InvalidField } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, countState, databaseLayer, itemTables, setRow, unsafe } from "../support/db.js"
import { dbNow, expectAround, withRepo } from "../support/harness.js"

const Repo = QueueRepo.QueueRepo
const lease = "1 minute"
const HOUR = 3_600_000
const DAY = 24 * HOUR

/** Text a careless encoder would change: quotes, backslashes, newlines, unicode, JSON-looking text, a long run. */
export const HOSTILE: ReadonlyArray<string> = [
  `it's "quoted" and 'single'`,
  "back\\slash \\\\ and \\n (not a newline) and \\u0041",
  "line 1\nline 2\r\nline 3\ttabbed",
  "ünïcödé ✓ 日本語 🎉 \u200b zero width",
  `{"looks": "like json", "n": [1, 2, 3]}`,
  "[1, 2, 3]",
  "null",
  "-- ; DROP TABLE docket_items; --",
  "$1 ?1 $$ dollar quoted $$",
  "x".repeat(10_000)
]

const item = (id: number) => Effect.map(Effect.flatMap(Repo, (r) => r.get(id)), Option.getOrThrow)

/** Enqueues one item of `kind` and claims it. */
const claimOne = (kind: string, payload: unknown = {}) =>
  Effect.gen(function*() {
    const repo = yield* Repo
    yield* repo.enqueue(kind, payload)
    const [claim] = yield* repo.claim({ worker: "history-w", limit: 1, lease, kinds: [kind] })
    return claim
  })

const expectInvalid = <A, E, R>(effect: Effect.Effect<A, E, R>, field: InvalidField) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    expect(error).toBeInstanceOf(InvalidInput)
    expect((error as InvalidInput).field).toBe(field)
    return error as InvalidInput
  })

/** What the tests below share: a fresh migrated database for each (`run`). */
const context = (backend: Backend) => {
  const run = <A, E>(program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>, options?: QueueRepo.Options) =>
    withRepo(backend, program, options)
  return { run }
}

const resultsKept = (backend: Backend) => {
  const { run } = context(backend)
  it.live("a result round-trips exactly: hostile strings, nesting, numbers, booleans, null members", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const results: ReadonlyArray<unknown> = [
        ...HOSTILE,
        { nested: { list: [...HOSTILE.slice(0, 4), 1.5, -0.25, 1e21, true, false, null] }, "key \"with\" quotes": "v" },
        [],
        {},
        0,
        false
      ]
      const claims = yield* Effect.forEach(results, (_, i) => claimOne("result.kind", i))
      // One batch, results in the claims' order.
      expect(yield* repo.completeMany(claims.map((claim, i) => ({ claim, result: results[i] })))).toEqual(claims.map(() => true))
      for (let i = 0; i < claims.length; i++) {
        const done = yield* item(claims[i].id)
        expect(done.state).toBe("done")
        expect(done.result).toEqual(results[i])
      }
      // Undefined stores none; a claim alone too.
      const [a, b] = [yield* claimOne("result.none"), yield* claimOne("result.none")]
      expect(yield* repo.complete(a, undefined)).toBe(true)
      expect(yield* repo.completeMany([b])).toEqual([true])
      expect((yield* item(a.id)).result).toBeNull()
      expect((yield* item(b.id)).result).toBeNull()
    })))

  it.live("a result that is not JSON or too large is an InvalidInput on result; nothing of the batch changes", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const ok = yield* claimOne("big")
      const bad = yield* claimOne("big")
      const tooLarge = yield* expectInvalid(
        repo.completeMany([{ claim: ok, result: 1 }, { claim: bad, result: "x".repeat(2000) }]),
        "result"
      )
      expect(tooLarge.reason).toMatch(/^completion 1: is larger than 1000 bytes as JSON$/)
      yield* expectInvalid(repo.complete(bad, 10n), "result")
      yield* expectInvalid(repo.complete(bad, { n: Number.NaN }), "result")
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      yield* expectInvalid(repo.complete(bad, cyclic), "result")
      // Both still running, their claims still good.
      expect((yield* item(ok.id)).state).toBe("running")
      expect((yield* item(bad.id)).state).toBe("running")
      // Multi-byte text counts in bytes: 400 three-byte characters are 1,202 bytes as JSON.
      yield* expectInvalid(repo.complete(bad, "日".repeat(400)), "result")
      expect(yield* repo.completeMany([ok, { claim: bad, result: "x".repeat(990) }])).toEqual([true, true])
      expect((yield* item(bad.id)).result).toBe("x".repeat(990))
    }), { maxResultBytes: 1000 }))
}

const errorsAndFinishes = (backend: Backend) => {
  const { run } = context(backend)
  it.live("each attempt's error is kept with its attempt, time and worker, hostile text exactly; the last 20", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const { id } = yield* repo.enqueue("flaky", {}, { maxAttempts: 100 })
      const seen: Array<{ attempt: number; worker: string; error: string; low: number; high: number }> = []
      const errors = [...HOSTILE, ...Array.from({ length: 15 }, (_, i) => `failure ${i}`)]
      for (let i = 0; i < errors.length; i++) {
        const worker = `w-${i % 3}`
        const [claim] = yield* repo.claim({ worker, limit: 1, lease, kinds: ["flaky"] })
        const low = yield* dbNow
        expect(yield* repo.fail(claim, errors[i], { _tag: "Retry", delay: 0 })).toBe("retried")
        const high = yield* dbNow
        seen.push({ attempt: i + 1, worker, error: errors[i], low, high })
      }
      const stored = yield* item(id)
      const last = seen.slice(-20)
      expect(stored.errors.map((e) => [e.attempt, e.worker, e.error])).toEqual(last.map((e) => [e.attempt, e.worker, e.error]))
      stored.errors.forEach((e, i) => expectAround(e.at, last[i].low, last[i].high, 50))
      expect(stored.lastError).toBe(errors[errors.length - 1])
      expect(stored.finishedAt).toBeNull()
      // Dead at last: finished now, its final error the newest entry.
      const [claim] = yield* repo.claim({ worker: "w-final", limit: 1, lease, kinds: ["flaky"] })
      const before = yield* dbNow
      expect(yield* repo.fail(claim, "Permanent: gone", { _tag: "Dead" })).toBe("dead")
      const dead = yield* item(id)
      expect(dead.errors).toHaveLength(20)
      expect(dead.errors.at(-1)).toMatchObject({ attempt: errors.length + 1, worker: "w-final", error: "Permanent: gone" })
      expect(dead.errors[0].error).toBe(last[1].error)
      expectAround(dead.finishedAt!, before, yield* dbNow, 50)
      expect(dead.claimedBy).toBeNull()
    })))

  it.live("cancelled by a person or its handler: finished now; a handler's cancel is an attempt error", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const waiting = yield* repo.enqueue("c", {})
      const before = yield* dbNow
      expect(yield* repo.cancel([waiting.id], { reason: "not needed" })).toEqual(["cancelled"])
      const cancelled = yield* item(waiting.id)
      expectAround(cancelled.finishedAt!, before, yield* dbNow, 50)
      expect(cancelled.errors).toEqual([])
      const claim = yield* claimOne("c2")
      expect(yield* repo.fail(claim, "Cancel: the order was withdrawn", { _tag: "Cancel" })).toBe("cancelled")
      const byHandler = yield* item(claim.id)
      expect(byHandler.finishedAt).not.toBeNull()
      expect(byHandler.errors.map((e) => [e.attempt, e.worker, e.error])).toEqual([[1, "history-w", "Cancel: the order was withdrawn"]])
      // A finished item is left as it is by a cancel, a done one too.
      const done = yield* claimOne("c3")
      expect(yield* repo.complete(done)).toBe(true)
      expect(yield* repo.cancel([done.id])).toEqual(["finished"])
      expect((yield* item(done.id)).state).toBe("done")
    })))

  it.live("a retried dead item keeps its history: errors kept, finish time and result cleared; later attempts add to it", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const { id } = yield* repo.enqueue("doomed", { n: 1 }, { maxAttempts: 2 })
      for (const error of ["first: it's \"bad\"", "second\nline"]) {
        const [claim] = yield* repo.claim({ worker: "w1", limit: 1, lease, kinds: ["doomed"] })
        yield* repo.fail(claim, error, { _tag: "Retry", delay: 0 })
      }
      const dead = yield* item(id)
      expect(dead.state).toBe("dead")
      expect(dead.finishedAt).not.toBeNull()
      expect(yield* repo.retryDead({ ids: [id] })).toEqual([id])
      const retried = yield* item(id)
      expect(retried).toMatchObject({ state: "waiting", attempts: 0, finishedAt: null, result: null })
      expect(retried.errors).toEqual(dead.errors)
      const [claim] = yield* repo.claim({ worker: "w2", limit: 1, lease, kinds: ["doomed"] })
      yield* repo.fail(claim, "third", { _tag: "Retry", delay: 0 })
      const [again] = yield* repo.claim({ worker: "w3", limit: 1, lease, kinds: ["doomed"] })
      expect(yield* repo.complete(again, { finally: "ok" })).toBe(true)
      const done = yield* item(id)
      expect(done).toMatchObject({ state: "done", result: { finally: "ok" }, claimedBy: "w3", attempts: 2 })
      expect(done.errors.map((e) => [e.attempt, e.worker, e.error])).toEqual([
        [1, "w1", "first: it's \"bad\""],
        [2, "w1", "second\nline"],
        [1, "w2", "third"]
      ])
    })))
}

const resultsAndErrors = (backend: Backend) => {
  describe("history: results and attempt errors", () => {
    resultsKept(backend)
    errorsAndFinishes(backend)
  })
}

const retentionAndPruning = (backend: Backend) => {
  const { run } = context(backend)
  describe("history: retention and pruning", () => {
    // Items finished `agoMs` before the database's now, by state (their finished_at set).
    const finishedAgo = (kind: string, state: "done" | "dead" | "cancelled", agoMs: number) =>
      Effect.gen(function*() {
        const repo = yield* Repo
        const claim = yield* claimOne(kind)
        if (state === "done") yield* repo.complete(claim, { kind })
        else yield* repo.fail(claim, "x", { _tag: state === "dead" ? "Dead" : "Cancel" })
        yield* setRow(claim.id, { finished_at: (yield* dbNow) - agoMs })
        return claim.id
      })

    it.live("prune deletes what finished longer ago than its state's retention, and nothing younger; dead kept for ever by default", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const oldDone = yield* finishedAgo("k", "done", 2 * HOUR)
        const youngDone = yield* finishedAgo("k", "done", HOUR - 60_000)
        const oldCancelled = yield* finishedAgo("k", "cancelled", 3 * DAY)
        const youngCancelled = yield* finishedAgo("k", "cancelled", DAY + HOUR)
        const ancientDead = yield* finishedAgo("k", "dead", 3650 * DAY)
        const waiting = (yield* repo.enqueue("k", {})).id
        expect(yield* repo.prune).toEqual({ done: 1, cancelled: 1, dead: 0 })
        const left = (yield* repo.getMany([oldDone, youngDone, oldCancelled, youngCancelled, ancientDead, waiting])).map((i) => i.id)
        expect(left).toEqual([youngDone, youngCancelled, ancientDead, waiting])
        // Nothing more is due: a second prune deletes nothing.
        expect(yield* repo.prune).toEqual({ done: 0, cancelled: 0, dead: 0 })
        expect(yield* countAll).toBe(4)
      }), { retention: { done: "1 hour", cancelled: "2 days" } }))

    it.live("the defaults: done and cancelled a day, dead for ever", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const kept = [yield* finishedAgo("k", "done", DAY - HOUR), yield* finishedAgo("k", "cancelled", DAY - HOUR)]
        yield* finishedAgo("k", "done", DAY + HOUR)
        yield* finishedAgo("k", "cancelled", DAY + HOUR)
        const dead = yield* finishedAgo("k", "dead", 1000 * DAY)
        expect(yield* repo.prune).toEqual({ done: 1, cancelled: 1, dead: 0 })
        expect((yield* repo.getMany([...kept, dead])).map((i) => i.id)).toEqual([...kept, dead])
      })))

    it.live("retention 0: complete deletes at once (no history); cancelled and dead go at the next prune; a dead retention prunes dead items", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const claim = yield* claimOne("zero")
        expect(yield* repo.complete(claim, { big: "x".repeat(5000) })).toBe(true)
        expect(yield* repo.get(claim.id)).toEqual(Option.none())
        const cancelled = yield* finishedAgo("zero", "cancelled", 0)
        const dead = yield* finishedAgo("zero", "dead", 31 * DAY)
        const youngDead = yield* finishedAgo("zero", "dead", 29 * DAY)
        expect(yield* repo.prune).toEqual({ done: 0, cancelled: 1, dead: 1 })
        expect((yield* repo.getMany([cancelled, dead, youngDead])).map((i) => i.id)).toEqual([youngDead])
      }), { retention: { done: 0, cancelled: 0, dead: "30 days" }, maxResultBytes: 100 }))

    it.live("a prune deletes at most 1,000 of a state per statement, the oldest first", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueueMany(Array.from({ length: 1205 }, (_, i) => ({ kind: "bulk", payload: i })))
        const claims = yield* repo.claim({ worker: "w", limit: 1205, lease })
        expect(yield* repo.completeMany(claims)).toEqual(claims.map(() => true))
        // Older as the id grows (one statement): the newest ids go first.
        const sql = yield* SqlClient.SqlClient
        const base = (yield* dbNow) - DAY - HOUR
        for (const table of yield* itemTables) {
          yield* unsafe(`UPDATE ${table} SET finished_at = ${base} - (id - ${claims[0].id}) * 1000`)
        }
        expect(yield* repo.prune).toEqual({ done: 1000, cancelled: 0, dead: 0 })
        const left = (yield* repo.list({ state: "done", limit: 1000 })).items.map((i) => i.id)
        expect(left).toEqual(claims.slice(0, 205).map((c) => c.id))
        expect(yield* repo.prune).toEqual({ done: 205, cancelled: 0, dead: 0 })
        expect(yield* countState("done")).toBe(0)
      })), 60_000)

    it.live("a bad retention is an InvalidInput on retention, naming the state, when the service is built", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        for (const retention of [{ done: -1 }, { cancelled: "soon" }, { dead: "for ever" }, { done: Number.NaN }, { dead: 1e30 }]) {
          const exit = yield* Effect.exit(
            Layer.build(QueueRepo.layer({ retention: retention as QueueRepo.Retention }).pipe(Layer.provide(databaseLayer(url))))
          ).pipe(Effect.scoped)
          expect(Exit.isFailure(exit)).toBe(true)
          const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
          expect(defect).toBeInstanceOf(InvalidInput)
          expect((defect as InvalidInput).field).toBe("retention")
          expect((defect as InvalidInput).reason).toMatch(new RegExp(`^${Object.keys(retention)[0]}: `))
        }
      }))
  })
}

const historyList = (backend: Backend) => {
  const { run } = context(backend)
  describe("history: list", () => {
    it.live("pages through every item exactly once, newest first, for each state and for all; the cursor ends with the last page", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        // 7 waiting (due), 4 scheduled, 3 running, 8 done, 5 dead, 6 cancelled, of two kinds.
        const ids: Record<string, Array<number>> = { waiting: [], scheduled: [], running: [], done: [], dead: [], cancelled: [] }
        const now = yield* dbNow
        for (let i = 0; i < 8; i++) {
          const claim = yield* claimOne(i % 2 === 0 ? "x" : "y")
          yield* repo.complete(claim, i)
          // Finish times out of id order, two equal: the order is (finished_at, id) descending.
          yield* setRow(claim.id, { finished_at: now - [5, 1, 7, 1, 3, 8, 2, 6][i] * 1000 })
          ids.done.push(claim.id)
        }
        for (let i = 0; i < 5; i++) {
          const claim = yield* claimOne(i % 2 === 0 ? "x" : "y")
          yield* repo.fail(claim, `dead ${i}`, { _tag: "Dead" })
          ids.dead.push(claim.id)
        }
        for (let i = 0; i < 6; i++) ids.cancelled.push((yield* repo.enqueue(i % 2 === 0 ? "x" : "y", i)).id)
        yield* repo.cancel(ids.cancelled)
        for (let i = 0; i < 3; i++) ids.running.push((yield* claimOne(i % 2 === 0 ? "x" : "y")).id)
        for (let i = 0; i < 4; i++) ids.scheduled.push((yield* repo.enqueue(i % 2 === 0 ? "x" : "y", i, { delay: "1 hour" })).id)
        for (let i = 0; i < 7; i++) ids.waiting.push((yield* repo.enqueue(i % 2 === 0 ? "x" : "y", i)).id)

        const all = (options: QueueRepo.ListOptions) =>
          Effect.gen(function*() {
            const pages: Array<ReadonlyArray<QueueRepo.Item>> = []
            let cursor: string | undefined
            for (;;) {
              const page = yield* repo.list({ ...options, cursor })
              pages.push(page.items)
              if (page.cursor === null) break
              cursor = page.cursor
            }
            return pages
          })
        const byFinish = (a: QueueRepo.Item, b: QueueRepo.Item) => b.finishedAt! - a.finishedAt! || b.id - a.id
        const expected = yield* Effect.forEach(Object.keys(ids), (state) =>
          Effect.map(repo.getMany(ids[state]), (items) => [state, items] as const))
        for (const [state, items] of expected) {
          const finished = state === "done" || state === "dead" || state === "cancelled"
          const order = [...items].sort(finished ? byFinish : (a, b) => b.id - a.id)
          for (const kind of [undefined, "x", "y"]) {
            const want = order.filter((i) => kind === undefined || i.kind === kind).map((i) => i.id)
            const pages = yield* all({ state: state as QueueRepo.ListState, kind, limit: 2 })
            expect(pages.flat().map((i) => i.id), `${state} ${kind}`).toEqual(want)
            // Full pages but the last, and no empty last page.
            expect(pages.slice(0, -1).every((p) => p.length === 2)).toBe(true)
            expect(pages.at(-1)!.length).toBeGreaterThan(want.length === 0 ? -1 : 0)
          }
        }
        const everything = (yield* all({ limit: 5 })).flat().map((i) => i.id)
        expect(everything).toEqual(Object.values(ids).flat().sort((a, b) => b - a))
        // Items listed carry their history.
        const [firstDead] = (yield* repo.list({ state: "dead", limit: 1 })).items
        expect(firstDead).toMatchObject({ id: ids.dead[4], errors: [{ attempt: 1, worker: "history-w", error: "dead 4" }] })
        expect((yield* repo.list({ state: "done", limit: 1 })).items[0]).toMatchObject({ id: ids.done[3], result: 3 })
      })), 60_000)

    it.live("a page's cursor stays right while items are added and pruned between pages: none repeated, none skipped", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const first = yield* Effect.forEach(Array.from({ length: 6 }), (_, i) => Effect.map(repo.enqueue("p", i), (r) => r.id))
        const page1 = yield* repo.list({ limit: 3 })
        expect(page1.items.map((i) => i.id)).toEqual(first.slice(3).reverse())
        // Newer items added, and one of the next page gone (cancelled then pruned).
        yield* repo.enqueue("p", "late")
        yield* repo.cancel([first[1]])
        yield* setRow(first[1], { finished_at: 0 })
        yield* repo.prune
        const page2 = yield* repo.list({ limit: 3, cursor: page1.cursor! })
        expect(page2.items.map((i) => i.id)).toEqual([first[2], first[0]])
        expect(page2.cursor).toBeNull()
      }), { retention: { cancelled: 0 } }))

    it.live("bad input: a state, kind, limit or cursor that is wrong is an InvalidInput on that field", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        for (let i = 0; i < 3; i++) yield* repo.enqueue("b", i)
        const page = yield* repo.list({ state: "waiting", limit: 1 })
        expect(page.cursor).not.toBeNull()
        yield* expectInvalid(repo.list({ state: "finished" as QueueRepo.ListState }), "state")
        yield* expectInvalid(repo.list({ kind: "" }), "kind")
        for (const limit of [0, 1001, 1.5, Number.NaN]) yield* expectInvalid(repo.list({ limit }), "limit")
        for (const cursor of ["", "not a cursor", "e30", Buffer.from("[1,null,null,0,-5]").toString("base64url"), "x".repeat(5000)]) {
          yield* expectInvalid(repo.list({ cursor }), "cursor")
        }
        // A cursor of another listing (state or kind) is refused, not read wrong.
        const other = yield* expectInvalid(repo.list({ state: "scheduled", cursor: page.cursor! }), "cursor")
        expect(other.reason).toMatch(/another listing/)
        yield* expectInvalid(repo.list({ state: "waiting", kind: "b", cursor: page.cursor! }), "cursor")
        expect((yield* repo.list({ state: "waiting", limit: 5, cursor: page.cursor! })).items).toHaveLength(2)
      })))
  })
}

export const historySuite = (backend: Backend) => {
  resultsAndErrors(backend)
  retentionAndPruning(backend)
  historyList(backend)
}
