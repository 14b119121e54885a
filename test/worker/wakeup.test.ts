/**
 * The wake-up part (src/internal/worker/wakeup.ts) over a real SQLite file's
 * Wakeups: its signal wakes on an enqueue through this process's repository,
 * it hears this process's cancels of running items, and its stop closes it
 * (its scope: nothing reaches it after).
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Budget } from "../../src/internal/worker/bounded.js"
import * as Wakeup from "../../src/internal/worker/wakeup.js"
import { claimed, cleanup, freshRepo } from "../support/worker.js"

afterAll(cleanup)

describe("the wake-up part", () => {
  it.scopedLive("an enqueue here wakes its wait, and so does its own notify", () =>
    Effect.gen(function*() {
      const { repo, wakeups } = yield* freshRepo
      const wakeup = yield* Wakeup.make({ wakeups, listen: false, onCancel: () => {} })
      yield* wakeup.start()
      yield* repo.enqueue("job", {})
      // Remembered until the wait: it returns at once, not after the minute.
      yield* wakeup.wait(60_000).pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => "not woken" }))
      wakeup.notify()
      yield* wakeup.wait(60_000).pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => "not woken" }))
    }))

  it.scoped("it hears this process's cancels of running items until its stop closes it", () =>
    Effect.gen(function*() {
      const { repo, wakeups } = yield* freshRepo
      const heard: Array<ReadonlyArray<number>> = []
      const wakeup = yield* Wakeup.make({ wakeups, listen: false, onCancel: (ids) => void heard.push(ids) })
      yield* wakeup.start()
      const [a, b] = yield* claimed(repo, 2)
      yield* repo.cancel([a.id])
      expect(heard).toEqual([[a.id]])
      yield* wakeup.stop(new Budget(10_000))
      yield* repo.cancel([b.id])
      expect(heard).toEqual([[a.id]])
    }))
})
