/**
 * The runtime suite: a dead item that holds its group (`perGroup.onDead:
 * "hold"`) retried or deleted by a person, and the group's next item started
 * at once, not at the pool's next poll (the pools here poll once a minute, so
 * only a wake-up starts it within the 10 s each test waits). From elsewhere
 * (a connection pool and wake-ups of its own, as `docket dead retry|delete`
 * in another process: a NOTIFY on PostgreSQL, the file's watch on SQLite),
 * and through the pool's own QueueRepo with the pool not listening (this
 * process's wake-ups). Run on SQLite and PostgreSQL by
 * test/worker/runtime/sqlite.test.ts and pg.test.ts.
 *
 * What each proves: "from elsewhere", that another process's retry or delete
 * wakes the pool (PostgreSQL: the statements' NOTIFY; SQLite: the file's
 * watch, which any commit to the file sets off); "through the pool's own
 * QueueRepo", that the repository's own wake-up does (`retryDead` and
 * `deleteDead` call `Wakeups.enqueued`; with `listen: false` nothing else
 * wakes the pool on either dialect: each fails without that call, checked
 * on both). Until `whenIdle` waited for the claim owed after a written
 * outcome or a wake-up the claimer had not taken (state.ts, `quiet`), it
 * resolved as soon as the dead item was written, before the claimer's claim
 * after that write (or after `whenIdle`'s own nudge, when it came during a
 * claim); the person's retry then landed before that claim, which found the
 * item due, and the variants passed without the wake-up under test (SQLite
 * always, PostgreSQL at times).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Docket, Handler, Permanent, QueueRepo, Worker } from "../../../src/index.js"
import type { Backend } from "../../support/db.js"
import { repoLayer } from "../../support/db.js"
import { waitForEvent } from "../../support/events.js"
import { withPool } from "../../support/harness.js"
import { item } from "../../support/runtime.js"

type Way = "retry" | "delete"

// Items whose n is in `failing` go dead at their first attempt.
const sequence = (failing: Set<number>) =>
  Handler.make("seq", {
    payload: Schema.Struct({ n: Schema.Number }),
    perGroup: { concurrency: 1, ordered: true, onDead: "hold" },
    run: ({ n }) => (failing.has(n) ? Effect.fail(new Permanent({ reason: `refused ${n}` })) : Effect.void)
  })

// What a person does to the dead item, through `repo`.
const act = (repo: QueueRepo.Service, way: Way, id: number) =>
  way === "retry" ? repo.retryDead({ ids: [id] }) : repo.deleteDead({ ids: [id] })

/**
 * Group a's first item goes dead and holds the group; once the pool is idle
 * (its second item held), `person` retries or deletes it; the second item
 * (and, on a retry, the first before it) completes within 10 s.
 */
const heldThenFreed = (
  backend: Backend,
  listen: boolean,
  way: Way,
  person: (url: string, id: number) => Effect.Effect<ReadonlyArray<number>, unknown, QueueRepo.QueueRepo>
) => {
  const failing = new Set([1])
  const Seq = sequence(failing)
  return withPool(backend, { handlers: [Seq], poll: "1 minute", listen }, (url) =>
    Effect.gen(function*() {
      const pool = yield* Worker.Worker
      const events = yield* pool.subscribe
      const first = yield* Docket.client(Seq).enqueue({ n: 1 }, { group: "a" })
      const second = yield* Docket.client(Seq).enqueue({ n: 2 }, { group: "a" })
      yield* waitForEvent(events, (e) => e._tag === "Dead" && e.claim.id === first.id, "10 seconds")
      yield* pool.whenIdle
      expect((yield* item(second.id))?.state).toBe("waiting")
      failing.delete(1)
      expect(yield* person(url, first.id)).toEqual([first.id])
      const { seen } = yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === second.id, "10 seconds")
      const completed = seen.flatMap((e) => (e._tag === "Completed" ? [e.claim.id] : []))
      expect(completed).toEqual(way === "retry" ? [first.id, second.id] : [second.id])
    }))
}

/** Registers the tests for a backend. */
export const groupWakeRuntimeSuite = (backend: Backend) => {
  describe("a dead item holding its group, retried or deleted: the group goes on at once", () => {
    for (const way of ["retry", "delete"] as const) {
      it.live(`${way} from elsewhere (as the command in another process)`, () =>
        heldThenFreed(backend, true, way, (url, id) =>
          Effect.scoped(Effect.provide(Effect.flatMap(QueueRepo.QueueRepo, (repo) => act(repo, way, id)), repoLayer(url)))))

      it.live(`${way} through the pool's own QueueRepo, the pool not listening (this process's wake-ups)`, () =>
        heldThenFreed(backend, false, way, (_, id) => Effect.flatMap(QueueRepo.QueueRepo, (repo) => act(repo, way, id))))
    }
  })
}
