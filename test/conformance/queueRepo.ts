/**
 * The QueueRepo conformance suite: written once, run against every backend
 * (test/queueRepo.sqlite.test.ts, test/queueRepo.pg.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, expireLease } from "../support/db.js"
import { withRepo } from "./harness.js"

export const queueRepoConformance = (backend: Backend) => {
  const lease = "30 seconds"

  describe("enqueue and claim", () => {
    it.live("a claimed item is leased: a second claimer skips it until the lease runs out", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const added = yield* repo.enqueue("email.send", { to: "a@example.com" })
        expect(added._tag).toBe("Enqueued")
        const [first] = yield* repo.claim({ worker: "w1", limit: 10, lease })
        expect(first.id).toBe(added.id)
        expect(first.attempt).toBe(1)
        expect(JSON.parse(first.payloadJson)).toEqual({ to: "a@example.com" })
        expect(yield* repo.claim({ worker: "w2", limit: 10, lease })).toEqual([])
        yield* expireLease(first.id)
        const [again] = yield* repo.claim({ worker: "w2", limit: 10, lease })
        expect(again.id).toBe(first.id)
        expect(again.attempt).toBe(2)
        expect(again.token).not.toBe(first.token)
        expect(yield* repo.get(first.id)).toSatisfy(Option.isSome)
      })))
  })
}
