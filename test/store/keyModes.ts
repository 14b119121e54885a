/**
 * Part of the shared store suite (run from ./suite.ts on every backend): what
 * a second enqueue of a held dedupe key does (`onConflict`: keep, replace,
 * debounce, replaceRunning), in single and bulk enqueues, through a typed
 * client's per-kind default, and under concurrent enqueues of one key.
 */
import type { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as Docket from "../../src/Docket.js"
import { InvalidInput } from "../../src/Errors.js"
import * as Handler from "../../src/Handler.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { REPLACED_REASON } from "../../src/internal/store/enqueue.js"
import { type Backend, countAll, countState, repoLayer, setRow, unsafe } from "../support/db.js"
import { dbNow, expectAround, withRepo } from "../support/harness.js"

const Repo = QueueRepo.QueueRepo
const lease = "30 seconds"
const HOUR = 3_600_000

const getItem = (id: number) => Effect.flatMap(Repo, (repo) => repo.get(id)).pipe(Effect.map(Option.getOrThrow))

/** The waiting items of a kind and key (the unique index allows one at most). */
const waitingOf = (kind: string, key: string) =>
  unsafe<{ id: number | string; payload: string }>(
    `SELECT id, payload FROM docket_items WHERE kind = '${kind}' AND dedupe_key = '${key}' AND state = 'waiting'`
  ).pipe(Effect.map((rows) => rows.map((r) => ({ id: Number(r.id), payload: JSON.parse(r.payload) as unknown }))))

const modes = (backend: Backend) => {
  const run = <A, E>(program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>) => withRepo(backend, program)

  it.live("keep (the default): the waiting item stays as it is", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("sync", { v: 1 }, { key: "k", priority: 3 })
      expect(first._tag).toBe("Enqueued")
      expect(yield* repo.enqueue("sync", { v: 2 }, { key: "k", priority: 9 })).toEqual({ _tag: "Deduplicated", id: first.id })
      const kept = yield* repo.enqueue("sync", { v: 3 }, { key: "k", onConflict: "keep", delay: "1 hour" })
      expect(kept).toEqual({ _tag: "Deduplicated", id: first.id })
      expect(yield* getItem(first.id)).toMatchObject({ payload: { v: 1 }, priority: 3 })
      expect(yield* countAll).toBe(1)
    })))

  it.live("replace: the waiting item takes the payload, due time, group and given priority and max attempts; keeps its id", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("sync", { v: 1 }, { key: "k", priority: 3, maxAttempts: 4, delay: "1 hour", group: "g1" })
      // A retry's state starts again: attempts, snoozes and the last error.
      yield* setRow(first.id, { attempts: 2, snoozes: 5, last_error: "boom" })
      const replaced = yield* repo.enqueue("sync", { v: 2 }, { key: "k", onConflict: "replace", group: "g2" })
      expect(replaced).toEqual({ _tag: "Replaced", id: first.id })
      const now = yield* dbNow
      const item = yield* getItem(first.id)
      // Priority and max attempts not given: kept. The due time is the new one (now), earlier than before.
      expect(item).toMatchObject({
        payload: { v: 2 }, priority: 3, maxAttempts: 4, group: "g2", attempts: 0, snoozes: 0, lastError: null, state: "waiting"
      })
      expectAround(item.runAt, now, now)
      const again = yield* repo.enqueue("sync", { v: 3 }, { key: "k", onConflict: "replace", priority: -1, maxAttempts: 9, delay: "2 hours" })
      expect(again).toEqual({ _tag: "Replaced", id: first.id })
      const later = yield* getItem(first.id)
      expect(later).toMatchObject({ payload: { v: 3 }, priority: -1, maxAttempts: 9 })
      expectAround(later.runAt, now + 2 * HOUR, now + 2 * HOUR)
      expect(yield* countAll).toBe(1)
      // Nothing waits on the key: a replace inserts.
      const other = yield* repo.enqueue("misc", { v: 4 }, { key: "other", onConflict: "replace" })
      expect(other._tag).toBe("Enqueued")
      // A claimed item is not replaced: the next enqueue waits beside it.
      yield* setRow(first.id, { run_at: 0 })
      const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease, kinds: ["sync"] })
      expect(claim.id).toBe(first.id)
      const next = yield* repo.enqueue("sync", { v: 5 }, { key: "k", onConflict: "replace" })
      expect(next._tag).toBe("Enqueued")
      expect(next.id).not.toBe(first.id)
      expect(yield* repo.complete(claim)).toBe(true)
    })))

  it.live("debounce: replaces, but the due time only moves later", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const first = yield* repo.enqueue("index", { v: 1 }, { key: "doc", onConflict: "debounce", delay: "1 hour" })
      expect(first._tag).toBe("Enqueued")
      const now = yield* dbNow
      // A shorter delay does not bring the run forward; the payload is replaced.
      expect(yield* repo.enqueue("index", { v: 2 }, { key: "doc", onConflict: "debounce", delay: "1 minute" }))
        .toEqual({ _tag: "Replaced", id: first.id })
      const held = yield* getItem(first.id)
      expect(held.payload).toEqual({ v: 2 })
      expectAround(held.runAt, now + HOUR, now + HOUR)
      // A later one pushes it back.
      yield* repo.enqueue("index", { v: 3 }, { key: "doc", onConflict: "debounce", runAt: now + 3 * HOUR })
      const pushed = yield* getItem(first.id)
      expect(pushed).toMatchObject({ payload: { v: 3 }, runAt: now + 3 * HOUR })
      // The same burst with "replace" follows the last enqueue's due time, earlier or not.
      yield* repo.enqueue("index", { v: 4 }, { key: "doc", onConflict: "replace", delay: "1 minute" })
      expectAround((yield* getItem(first.id)).runAt, now + 60_000, now + 60_000)
      expect(yield* countAll).toBe(1)
    })))

  it.live("replaceRunning: the running item is cancelled (its holder fenced out) and the new payload waits", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("build", { rev: 1 }, { key: "main" })
      const [claim] = yield* repo.claim({ worker: "holder", limit: 1, lease, kinds: ["build"] })
      expect(claim.id).toBe(added.id)
      const next = yield* repo.enqueue("build", { rev: 2 }, { key: "main", onConflict: "replaceRunning" })
      expect(next).toMatchObject({ _tag: "Enqueued", cancelled: [claim.id] })
      expect(yield* getItem(claim.id)).toMatchObject({ state: "cancelled", lastError: `Cancelled: ${REPLACED_REASON}` })
      // As `cancel` does: the holder's writes are refused as stale.
      expect(yield* repo.complete(claim)).toBe(false)
      expect(yield* repo.fail(claim, "late", { _tag: "Retry", delay: 0 })).toBe("stale")
      expect(yield* repo.release(claim)).toBe("stale")
      // The new one is not held back by a running twin: it is claimed at once.
      const [second] = yield* repo.claim({ worker: "w2", limit: 1, lease, kinds: ["build"] })
      expect(second.id).toBe(next.id)
      // Running and waiting at once: the running one is cancelled, the waiting one replaced.
      const waiting = yield* repo.enqueue("build", { rev: 3 }, { key: "main" })
      const third = yield* repo.enqueue("build", { rev: 4 }, { key: "main", onConflict: "replaceRunning" })
      expect(third).toEqual({ _tag: "Replaced", id: waiting.id, cancelled: [second.id] })
      expect(yield* repo.complete(second)).toBe(false)
      expect((yield* getItem(waiting.id)).payload).toEqual({ rev: 4 })
      // Nothing running: nothing cancelled, and it says so.
      expect(yield* repo.enqueue("build", { rev: 5 }, { key: "main", onConflict: "replaceRunning" }))
        .toEqual({ _tag: "Replaced", id: waiting.id, cancelled: [] })
      expect(yield* countState("running")).toBe(0)
      expect(yield* countState("cancelled")).toBe(2)
    })))

  it.live("a bad mode is refused with InvalidInput naming onConflict, and nothing is written", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      for (const bad of ["drop", "", "REPLACE", 1, {}]) {
        const options = { key: "k", onConflict: bad as unknown as QueueRepo.OnConflict }
        const one = yield* Effect.flip(repo.enqueue("job", 1, options))
        expect(one).toBeInstanceOf(InvalidInput)
        expect(one).toMatchObject({ field: "onConflict" })
        const many = yield* Effect.flip(repo.enqueueMany([{ kind: "job", payload: 0 }, { kind: "job", payload: 1, ...options }]))
        expect(many).toMatchObject({ field: "onConflict", reason: expect.stringContaining("item 1") })
      }
      expect(yield* countAll).toBe(0)
    })))
}

const bulkAndClient = (backend: Backend) => {
  const run = <A, E>(program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>) => withRepo(backend, program)

  it.live("enqueueMany: one key's enqueues apply in input order, each mode as if enqueued one by one", () =>
    run(Effect.gen(function*() {
      const repo = yield* Repo
      const results = yield* repo.enqueueMany([
        { kind: "sync", payload: 1, key: "a" },
        { kind: "sync", payload: 2, key: "a", onConflict: "replace" },
        { kind: "sync", payload: "x", key: "b", onConflict: "replace" },
        { kind: "sync", payload: 3, key: "a", onConflict: "replace", priority: 7 },
        { kind: "sync", payload: 4, key: "a" },
        { kind: "sync", payload: "plain", onConflict: "replace" },
        { kind: "sync", payload: 5, key: "a", onConflict: "debounce" }
      ])
      const a = results[0].id
      expect(results.map((r) => r._tag)).toEqual(["Enqueued", "Replaced", "Enqueued", "Replaced", "Deduplicated", "Enqueued", "Replaced"])
      for (const i of [1, 3, 4, 6]) expect(results[i].id).toBe(a)
      // Ids follow input order among the new items.
      expect(a).toBeLessThan(results[2].id)
      expect(results[2].id).toBeLessThan(results[5].id)
      expect(yield* getItem(a)).toMatchObject({ payload: 5, priority: 7 })
      expect(yield* waitingOf("sync", "b")).toEqual([{ id: results[2].id, payload: "x" }])
      expect(yield* countAll).toBe(3)
    })))

  it.live("a typed client applies its handler's onConflict unless the enqueue gives its own", () =>
    run(Effect.gen(function*() {
      const Refresh = Handler.make("refresh", {
        payload: Schema.Struct({ rev: Schema.Number }),
        run: () => Effect.void,
        onConflict: "replace"
      })
      const client = Docket.client(Refresh)
      const first = yield* client.enqueue({ rev: 1 }, { key: "r" })
      expect(yield* client.enqueue({ rev: 2 }, { key: "r" })).toEqual({ _tag: "Replaced", id: first.id })
      expect(yield* client.enqueue({ rev: 3 }, { key: "r", onConflict: "keep" })).toEqual({ _tag: "Deduplicated", id: first.id })
      const many = yield* client.enqueueMany([{ payload: { rev: 4 }, key: "r" }, { payload: { rev: 5 }, key: "r", onConflict: "keep" }])
      expect(many).toEqual([{ _tag: "Replaced", id: first.id }, { _tag: "Deduplicated", id: first.id }])
      expect((yield* getItem(first.id)).payload).toEqual({ rev: 4 })
    })))
}

// PostgreSQL: several pools (as several processes), each enqueueing at once;
// SQLite: one connection's fibers (its writers are serialised by the file).
const concurrent = (backend: Backend) => {
  const pools = backend.name === "sqlite" ? 1 : 4
  const perPool = 12
  const MODES: ReadonlyArray<QueueRepo.OnConflict> = ["replace", "debounce", "replaceRunning", "replace"]
  const burst = (url: string, mode: (n: number) => QueueRepo.OnConflict) =>
    Effect.all(
      Array.from({ length: pools }, (_, p) =>
        Effect.provide(
          Effect.all(
            Array.from({ length: perPool }, (_, i) => {
              const n = p * perPool + i
              return Effect.flatMap(Repo, (repo) => repo.enqueue("hot", { n }, { key: "one", onConflict: mode(n) }))
            }),
            { concurrency: "unbounded" }
          ),
          repoLayer(url)
        )),
      { concurrency: "unbounded" }
    ).pipe(Effect.map((results) => results.flat()))

  it.live("concurrent enqueues of one key leave exactly one waiting item, with one of their payloads", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const results = yield* burst(url, (n) => MODES[n % MODES.length])
      const check = Effect.gen(function*() {
        const waiting = yield* waitingOf("hot", "one")
        expect(waiting).toHaveLength(1)
        // Every enqueue stood for that one item: one insert, every other a replace.
        expect(results.filter((r) => r._tag === "Enqueued")).toHaveLength(1)
        expect(results.filter((r) => r._tag === "Replaced")).toHaveLength(pools * perPool - 1)
        for (const r of results) expect(r.id).toBe(waiting[0].id)
        expect((waiting[0].payload as { n: number }).n).toBeLessThan(pools * perPool)
        expect(yield* countAll).toBe(1)
      })
      yield* Effect.provide(check, repoLayer(url))
    }))

  it.live("concurrent replaceRunning enqueues cancel the running item once; its holder is fenced out", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => backend.fresh())
      const claim = yield* Effect.provide(
        Effect.gen(function*() {
          const repo = yield* Repo
          yield* repo.enqueue("hot", { n: -1 }, { key: "one" })
          const [claim] = yield* repo.claim({ worker: "holder", limit: 1, lease, kinds: ["hot"] })
          return claim
        }),
        repoLayer(url)
      )
      const results = yield* burst(url, () => "replaceRunning")
      const check = Effect.gen(function*() {
        const repo = yield* Repo
        const cancelled = results.flatMap((r) => (r._tag === "Deduplicated" ? [] : r.cancelled ?? []))
        expect(cancelled).toEqual([claim.id])
        expect(yield* repo.complete(claim)).toBe(false)
        expect(yield* getItem(claim.id)).toMatchObject({ state: "cancelled" })
        expect(yield* waitingOf("hot", "one")).toHaveLength(1)
        expect(yield* countState("running")).toBe(0)
      })
      yield* Effect.provide(check, repoLayer(url))
    }))
}

/** Registers the key-mode tests for a backend. */
export const keyModesSuite = (backend: Backend) => {
  describe(`${backend.name}: dedupe key modes`, () => {
    modes(backend)
    bulkAndClient(backend)
    concurrent(backend)
  })
}
