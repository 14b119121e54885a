/**
 * Wake-ups belong to their queue: two queues on two PostgreSQL databases in
 * one application each wake their own pools (each `QueueRepo.layer` builds
 * its own `Wakeups`; a shared one would LISTEN on the first database only).
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import * as Docket from "../src/Docket.js"
import * as Handler from "../src/Handler.js"
import * as Worker from "../src/Worker.js"
import { pgAvailable, pgBackend, repoLayer } from "./support/db.js"
import { waitForEvent } from "./support/events.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())

class PoolA extends Context.Tag("test/PoolA")<PoolA, Worker.Service>() {}
class PoolB extends Context.Tag("test/PoolB")<PoolB, Worker.Service>() {}

const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })

// A pool on `url` (polling once a minute: only a wake-up can start an item soon).
const poolOn = (url: string) => Worker.layer({ handlers: [Ok], poll: "1 minute" }).pipe(Layer.provide(repoLayer(url)))

// Enqueued through a connection pool of its own: only NOTIFY can wake the pool.
const enqueueElsewhere = (url: string) =>
  Effect.scoped(Effect.provide(Docket.client(Ok).enqueue({ at: Date.now() }), repoLayer(url)))

// The pool runs an item enqueued into its database elsewhere, long before its poll.
const wokenByItsDatabase = (pool: Worker.Service, url: string) =>
  Effect.scoped(Effect.gen(function*() {
    const events = yield* pool.subscribe
    yield* pool.whenIdle
    const added = yield* enqueueElsewhere(url)
    yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "10 seconds")
    expect((yield* pool.counters).completed).toBe(1)
  }))

describe.skipIf(!pgAvailable)("wake-ups on PostgreSQL", () => {
  it.live("two queues on two databases in one application: each pool is woken by its own database", () =>
    Effect.gen(function*() {
      const urlA = yield* Effect.promise(() => backend.fresh())
      const urlB = yield* Effect.promise(() => backend.fresh())
      // One layer graph (one memo map), two queues: each pool under a tag of its own.
      const both = Layer.merge(
        Layer.effect(PoolA, Worker.Worker).pipe(Layer.provide(poolOn(urlA))),
        Layer.effect(PoolB, Worker.Worker).pipe(Layer.provide(poolOn(urlB)))
      )
      const context = yield* Layer.build(both)
      yield* wokenByItsDatabase(Context.get(context, PoolA), urlA)
      yield* wokenByItsDatabase(Context.get(context, PoolB), urlB)
    }).pipe(Effect.scoped, Effect.timeout("60 seconds")))
})
