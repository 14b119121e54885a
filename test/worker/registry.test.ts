import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import { Budget, SHUTDOWN_DB_MS } from "../../src/internal/worker/bounded.js"
import * as Config from "../../src/internal/worker/config.js"
import * as Registry from "../../src/internal/worker/registry.js"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { cleanup, freshRepo, makePublisher } from "../support/worker.js"

afterAll(cleanup)

/** The repository with its heartbeats counted (and, when `gate` is given, held until it opens). */
const counting = (repo: QueueRepo.Service, gate?: Deferred.Deferred<void>) => {
  const calls = { beats: 0 }
  const counted: QueueRepo.Service = {
    ...repo,
    heartbeatWorker: (beat) =>
      Effect.zipRight(
        Effect.zipRight(Effect.sync(() => calls.beats++), gate === undefined ? Effect.void : Deferred.await(gate)),
        repo.heartbeatWorker(beat)
      )
  }
  return { calls, counted }
}

/** Lets forked fibers run until `done` holds (no time passes under the TestClock). */
const settle = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000 && !done(); i++) yield* Effect.yieldNow()
    expect(done()).toBe(true)
  })

const rows = (repo: QueueRepo.Service) => repo.listWorkers()

/** Reads until `done` holds, letting forked fibers run in between (no time passes under the TestClock). */
const until = <A, E>(read: Effect.Effect<A, E>, done: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000; i++) {
      const value = yield* read
      if (done(value)) return value
      yield* Effect.yieldNow()
    }
    throw new Error("condition not met")
  })

// The registry (src/internal/worker/registry.ts) on a real SQLite file.
describe("the registry", () => {
  it.scoped("registers at start, then beats once per interval (TestClock) with what runs now; a stop removes the row and ends the beats", () =>
    Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const { calls, counted } = counting(repo)
      let running = 0
      const registry = new Registry.Registry({
        repo: counted,
        registration: Registry.registration("w", ["job"], 2),
        intervalMs: 1_000,
        running: () => running,
        publisher: yield* makePublisher()
      })
      yield* registry.start(yield* Effect.scope)
      expect(calls.beats).toBe(1)
      expect(yield* rows(repo)).toMatchObject([{ id: registry.id, name: "w", kinds: ["job"], concurrency: 2, running: 0 }])
      running = 2
      yield* TestClock.adjust("999 millis")
      yield* settle(() => true)
      expect(calls.beats).toBe(1)
      yield* TestClock.adjust("1 millis")
      yield* settle(() => calls.beats === 2)
      expect(yield* until(rows(repo), (r) => r[0]?.running === 2)).toHaveLength(1)
      yield* registry.stop(new Budget(SHUTDOWN_DB_MS))
      expect(yield* rows(repo)).toEqual([])
      yield* TestClock.adjust("10 seconds")
      yield* Effect.yieldNow()
      expect(calls.beats).toBe(2)
      expect(yield* rows(repo)).toEqual([])
    }))

  it.scoped("a stop waits for the heartbeat in flight, which then cannot bring the row back", () =>
    Effect.gen(function*() {
      const { repo } = yield* freshRepo
      const gate = yield* Deferred.make<void>()
      const { calls, counted } = counting(repo, gate)
      const registry = new Registry.Registry({
        repo: counted,
        registration: Registry.registration("w", null, 1),
        intervalMs: 1_000,
        running: () => 0,
        publisher: yield* makePublisher()
      })
      const beat = yield* Effect.fork(registry.beat)
      yield* settle(() => calls.beats === 1)
      const stop = yield* Effect.fork(registry.stop(new Budget(SHUTDOWN_DB_MS)))
      yield* Effect.yieldNow()
      expect(stop.unsafePoll()).toBeNull()
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(beat)
      yield* Fiber.join(stop)
      expect(yield* rows(repo)).toEqual([])
      // And a later beat does nothing.
      yield* registry.beat
      expect(calls.beats).toBe(1)
      expect(yield* rows(repo)).toEqual([])
    }))

  it.scoped("a failed heartbeat is published as a storage failure, and the registry goes on", () =>
    Effect.gen(function*() {
      const { repo, sql } = yield* freshRepo
      const publisher = yield* makePublisher()
      const events = yield* publisher.subscribe
      const registry = new Registry.Registry({
        repo,
        registration: Registry.registration("w", null, 1),
        intervalMs: 1_000,
        running: () => 0,
        publisher
      })
      yield* sql.unsafe("DROP TABLE docket_workers")
      yield* registry.beat
      const event = yield* events.take
      expect(event).toMatchObject({ _tag: "StorageFailed", operation: "heartbeat" })
    }))

  it("pool ids are unique for one name; the heartbeat option is checked (50 ms to 5 s, default 5 s)", () => {
    const a = Registry.poolId("w")
    expect(a).toMatch(/^w#[0-9a-f]{8}$/)
    expect(Registry.poolId("w")).not.toBe(a)
    expect(Registry.registration("w", ["b", "a"], 1)).toMatchObject({ name: "w", kinds: ["a", "b"], pid: process.pid })
    expect(Config.resolve({}).heartbeatMs).toBe(5_000)
    expect(Config.resolve({ heartbeat: "50 millis" }).heartbeatMs).toBe(50)
    expect(() => Config.resolve({ heartbeat: "10 millis" })).toThrow("heartbeat must be from 50 to 5000 ms (got 10)")
    expect(() => Config.resolve({ heartbeat: "6 seconds" })).toThrow("heartbeat must be from 50 to 5000 ms (got 6000)")
  })
})
