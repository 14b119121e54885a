/**
 * The rate limit of storage-error log lines (src/internal/worker/events.ts),
 * under the TestClock: the first failure of an operation is logged at once,
 * then at most one line per period with the count of failures not logged,
 * and one line when it works again; every failure is still published.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Logger, Queue, Scope, TestClock } from "effect"
import type { Claim } from "../../src/Domain.js"
import type { Tag } from "../../src/Events.js"
import { StorageError } from "../../src/Errors.js"
import { STORAGE_LOG_PERIOD_MS, StorageErrorLog } from "../../src/internal/worker/events.js"
import { makePublisher } from "../support/worker.js"

const full = new StorageError({ operation: "claim", cause: new Error("database or disk is full") })

/** Runs `effect` with its warning lines captured. */
const captured = <A, E, R>(effect: (lines: Array<string>) => Effect.Effect<A, E, R>) => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    lines.push(`${logLevel.label}: ${parts.join(" ")}`)
  })
  return effect(lines).pipe(Effect.provide(Logger.add(logger)))
}

describe("the storage-error log", () => {
  it.scoped("logs the first failure at once, then one line per period with the count, then one when it works again", () =>
    captured((lines) =>
      Effect.gen(function*() {
        const publisher = yield* makePublisher()
        const events = yield* publisher.subscribe
        const fail = publisher.storageFailed("claim")(full)
        // A failing claim every 500 ms for 25 s: 50 failures.
        for (let i = 0; i < 50; i++) {
          yield* fail
          yield* TestClock.adjust("500 millis")
        }
        // Logged at 0, 10 s and 20 s (a period after the last line each time).
        expect(lines).toHaveLength(3)
        expect(lines[0]).toBe("WARN: docket: claim failed storage error in claim: database or disk is full")
        expect(lines[1]).toMatch(/^WARN: docket: claim failed \(19 more failures not logged in the last 10\.0 s; failing for 10\.0 s, logged at most once per 10\.0 s\) storage error in claim/)
        expect(lines[2]).toMatch(/\(19 more failures not logged in the last 10\.0 s; failing for 20\.0 s/)
        // Every failure was published.
        expect(yield* Queue.size(events)).toBe(50)
        yield* publisher.storageWorked("claim")
        expect(lines).toHaveLength(4)
        expect(lines[3]).toBe("WARN: docket: claim works again, after 50 failures in 25.0 s")
        // Working: nothing more; the next failure is a new episode, logged at once.
        yield* publisher.storageWorked("claim")
        expect(lines).toHaveLength(4)
        yield* fail
        expect(lines).toHaveLength(5)
        expect(lines[4]).toBe("WARN: docket: claim failed storage error in claim: database or disk is full")
      })
    ))

  it.scoped("each operation has its own limit", () =>
    captured((lines) =>
      Effect.gen(function*() {
        const publisher = yield* makePublisher()
        for (let i = 0; i < 10; i++) {
          yield* publisher.storageFailed("claim")(full)
          yield* publisher.storageFailed("record outcome")(full)
          yield* publisher.storageFailed("extend lease")(full)
          yield* TestClock.adjust("100 millis")
        }
        expect(lines.map((l) => l.split(" failed")[0])).toEqual([
          "WARN: docket: claim",
          "WARN: docket: record outcome",
          "WARN: docket: extend lease"
        ])
        yield* publisher.storageWorked("record outcome")
        expect(lines[3]).toBe("WARN: docket: record outcome works again, after 10 failures in 1.0 s")
      })
    ))

  it("an operation whose successes are not reported starts afresh after two periods without a failure", () => {
    const log = new StorageErrorLog(1000)
    expect(log.failed("heartbeat", 0)).toBe("")
    expect(log.failed("heartbeat", 500)).toBeUndefined()
    expect(log.failed("heartbeat", 1000)).toMatch(/^ \(1 more failures not logged in the last 1\.0 s; failing for 1\.0 s/)
    // Quiet for over two periods: a new episode.
    expect(log.failed("heartbeat", 3001)).toBe("")
    expect(log.failing("heartbeat")).toBe(true)
    expect(log.worked("heartbeat", 3500)).toBe("docket: heartbeat works again, after 1 failures in 0.5 s")
    expect(log.failing("heartbeat")).toBe(false)
    expect(STORAGE_LOG_PERIOD_MS).toBe(10_000)
  })
})

describe("subscriptions to some events", () => {
  const claim = { id: 1, kind: "k" } as unknown as Claim

  it.effect("a subscription to some tags gets only those; while it is the only one, the others are not made", () =>
    Effect.gen(function*() {
      const publisher = yield* makePublisher()
      expect(publisher.wants("Dead")).toBe(false)
      const scope = yield* Scope.make()
      const failures = yield* Scope.extend(publisher.subscribeTo(["Dead", "Retried"]), scope)
      expect([publisher.wants("Dead"), publisher.wants("Retried"), publisher.wants("Started"), publisher.wants("Completed")])
        .toEqual([true, true, false, false])
      yield* publisher.publish({ _tag: "Started", claim })
      yield* publisher.publish({ _tag: "Dead", claim, error: "boom" })
      yield* publisher.publish({ _tag: "Completed", claim, durationMs: 1 })
      expect((yield* Queue.takeAll(failures)).pipe(Chunk.toReadonlyArray).map((e) => e._tag)).toEqual(["Dead"])

      // A subscription to every event beside it: it gets them all, the filtered one still only its own.
      const everyScope = yield* Scope.make()
      const every = yield* Scope.extend(publisher.subscribe, everyScope)
      expect(publisher.wants("Started")).toBe(true)
      yield* publisher.publish({ _tag: "Started", claim })
      yield* publisher.publish({ _tag: "Retried", claim, error: "again", delayMs: 5 })
      expect((yield* Queue.takeAll(every)).pipe(Chunk.toReadonlyArray).map((e) => e._tag)).toEqual(["Started", "Retried"])
      expect((yield* Queue.takeAll(failures)).pipe(Chunk.toReadonlyArray).map((e) => e._tag)).toEqual(["Retried"])

      yield* Scope.close(everyScope, Exit.void)
      expect(publisher.wants("Started")).toBe(false)
      yield* Scope.close(scope, Exit.void)
      // No subscription left: no event of any tag is made (the record names every tag, or it does not compile).
      const allTags: Record<Tag, true> = {
        Claimed: true, Started: true, Completed: true, Retried: true, Snoozed: true, Dead: true, Cancelled: true,
        Absorbed: true, Released: true, LeaseLost: true, StorageFailed: true, Stopped: true
      }
      expect((Object.keys(allTags) as Array<Tag>).filter((tag) => publisher.wants(tag))).toEqual([])
      expect(yield* Queue.isShutdown(failures)).toBe(true)
    }))
})
