/**
 * Part of the runtime suite (run from ./suite.ts on SQLite and PostgreSQL):
 * `transactional` handlers (issue 36: an actor's state changes with its
 * message, atomically). The handler's own writes, through the `SqlClient` it
 * is given, commit with its item's completion or not at all. (Kills: the
 * crash suite's transactional scenario, test/reliability/transactional.ts.)
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Schema } from "effect"
import { Docket, Handler, QueueRepo, Retry, Worker } from "../../../src/index.js"
import { DONE } from "../../../src/internal/decide.js"
import { runInTransaction } from "../../../src/internal/worker/transactional.js"
import type { Backend } from "../../support/db.js"
import { setRow, unsafe } from "../../support/db.js"
import { waitForEvent } from "../../support/events.js"
import { withPool, withRepo } from "../../support/harness.js"
import { fast, item } from "../../support/runtime.js"

const TABLE = "CREATE TABLE tx_rows (item BIGINT NOT NULL, note TEXT NOT NULL)"
const rowsOf = (id: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ note: string }>`SELECT note FROM tx_rows WHERE item = ${id}`)

// The handler's write: a row naming its item (and what it says).
const write = (id: number, note: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO tx_rows (item, note) VALUES (${id}, ${note})`)

export const transactionalRuntimeSuite = (backend: Backend) => {
  describe("transactional handlers", () => {
    it.live("the handler's writes and its item's completion commit together", () => {
      const Apply = Handler.make("apply", {
        payload: Schema.Unknown,
        transactional: true,
        run: (_, job) => write(job.id, "applied")
      })
      return withPool(backend, { handlers: [Apply] }, () =>
        Effect.gen(function*() {
          yield* unsafe(TABLE)
          const events = yield* (yield* Worker.Worker).subscribe
          const added = yield* Docket.client(Apply).enqueue(null)
          yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
          expect((yield* item(added.id))?.state).toBe("done")
          expect(yield* rowsOf(added.id)).toEqual([{ note: "applied" }])
          expect(yield* (yield* Worker.Worker).counters).toMatchObject({ completed: 1, stale: 0 })
        }))
    })

    it.live("a failure rolls the handler's writes back; each attempt's writes are its own", () => {
      const Flaky = Handler.make("flaky", {
        payload: Schema.Unknown,
        transactional: true,
        maxAttempts: 3,
        backoff: fast,
        run: (_, job) =>
          Effect.zipRight(
            write(job.id, `attempt ${job.attempt}`),
            job.attempt < 3 ? Effect.fail(new Retry({ reason: `refused ${job.attempt}` })) : Effect.void
          )
      })
      return withPool(backend, { handlers: [Flaky] }, () =>
        Effect.gen(function*() {
          yield* unsafe(TABLE)
          const events = yield* (yield* Worker.Worker).subscribe
          const added = yield* Docket.client(Flaky).enqueue(null)
          const { seen } = yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id)
          expect(seen.filter((e) => e._tag === "Retried").length).toBe(2)
          expect(yield* item(added.id)).toMatchObject({ state: "done", attempts: 3 })
          // Only the attempt that succeeded left its write.
          expect(yield* rowsOf(added.id)).toEqual([{ note: "attempt 3" }])
        }))
    })

    it.live("a result that cannot be kept makes the item dead and leaves none of its writes", () => {
      const Bad = Handler.make("bad", {
        payload: Schema.Unknown,
        result: Schema.Number,
        transactional: true,
        run: (_, job) => Effect.as(write(job.id, "applied"), Number.NaN)
      })
      return withPool(backend, { handlers: [Bad] }, () =>
        Effect.gen(function*() {
          yield* unsafe(TABLE)
          const events = yield* (yield* Worker.Worker).subscribe
          const added = yield* Docket.client(Bad).enqueue(null)
          yield* waitForEvent(events, (e) => e._tag === "Dead" && e.claim.id === added.id)
          expect((yield* item(added.id))?.lastError).toMatch(/^ResultInvalid/)
          expect(yield* rowsOf(added.id)).toEqual([])
        }))
    })

    it.effect("a claim whose lease was taken before its run: nothing runs or is written (Stale)", () =>
      withRepo(backend, Effect.gen(function*() {
        yield* unsafe(TABLE)
        const repo = yield* QueueRepo.QueueRepo
        const added = yield* repo.enqueue("apply", null)
        const [claim] = yield* repo.claim({ worker: "w1", limit: 1, lease: "1 minute" })
        // Another worker's claim after this lease ran out: the token moved on.
        yield* setRow(added.id, { lease_seq: claim.token + 1 })
        let ran = false
        const end = yield* runInTransaction(repo, claim, 60_000, Effect.zipRight(write(added.id, "x"), Effect.sync(() => {
          ran = true
        })), (r) => Effect.as(Effect.orDie(r), DONE))
        expect(end).toEqual({ _tag: "Stale" })
        // SQLite checks its lease first (the write lock taken); PostgreSQL at the completion, after the run.
        expect(ran).toBe(backend.name === "pg")
        expect(yield* rowsOf(added.id)).toEqual([])
        expect((yield* repo.get(added.id)).pipe((o) => o._tag === "Some" && o.value.state)).toBe("running")
      })))

    if (backend.name === "pg") {
      it.live("PostgreSQL: a lease taken while the handler runs rolls its writes back at the completion", () =>
        withRepo(backend, Effect.gen(function*() {
          yield* unsafe(TABLE)
          const repo = yield* QueueRepo.QueueRepo
          const added = yield* repo.enqueue("apply", null)
          const [claim] = yield* repo.claim({ worker: "w1", limit: 1, lease: "1 minute" })
          const wrote = yield* Deferred.make<void>()
          const go = yield* Deferred.make<void>()
          const run = write(added.id, "x").pipe(Effect.zipRight(Deferred.succeed(wrote, undefined)), Effect.zipRight(Deferred.await(go)))
          const fiber = yield* Effect.fork(runInTransaction(repo, claim, 60_000, run, (r) => Effect.as(Effect.orDie(r), DONE)))
          yield* Deferred.await(wrote)
          // Another session takes the item meanwhile (its lease ran out, another worker claimed it).
          yield* setRow(added.id, { lease_seq: claim.token + 1 })
          yield* Deferred.succeed(go, undefined)
          expect(yield* Fiber.join(fiber)).toEqual({ _tag: "Stale" })
          expect(yield* rowsOf(added.id)).toEqual([])
        })))
    }
  })
}
