/**
 * Quickstart: define a handler, run Docket on a SQLite file with one layer,
 * enqueue through the handler's typed client, and watch the worker run the
 * items (one fails once and is retried after a short backoff).
 *
 *   npx tsx examples/quickstart.ts
 *
 * Prints one line per resized image, then the queue's counts (all zero).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Backoff, Docket, Handler, QueueRepo, Retry, Worker } from "docket"
import { Console, Effect, Queue, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

// 1. A handler: the kind, the payload's Schema, and what to do.
const Resize = Handler.make("image.resize", {
  payload: Schema.Struct({ image: Schema.String, width: Schema.Int.pipe(Schema.positive()) }),
  backoff: Backoff.constant("50 millis"),
  run: ({ image, width }, job) =>
    // A big image fails on its first attempt: a Retry, run again after the backoff.
    width > 1000 && job.attempt === 1
      ? Effect.fail(new Retry({ reason: "not enough memory right now" }))
      : Console.log(`resized ${image} to ${width}px (item ${job.id}, attempt ${job.attempt})`)
})

const program = Effect.gen(function*() {
  const worker = yield* Worker.Worker
  const events = yield* worker.subscribe

  // 2. Enqueue through the typed client: a payload of the wrong type does not compile.
  const resize = Docket.client(Resize)
  yield* resize.enqueue({ image: "cat.png", width: 200 })
  yield* resize.enqueue({ image: "dog.png", width: 640 })
  yield* resize.enqueue({ image: "panorama.png", width: 4000 })

  // 3. Wait until the three are done (the pool publishes what it does).
  let done = 0
  while (done < 3) {
    const event = yield* Queue.take(events)
    if (event._tag === "Retried") yield* Console.log(`${event.claim.kind} #${event.claim.id} failed (${event.error}); retrying`)
    if (event._tag === "Completed") done++
  }
  const stats = yield* Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.stats)
  yield* Console.log(`all 3 images resized; queue: due ${stats.due}, scheduled ${stats.scheduled}, dead ${stats.dead}`)
})

const main = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-quickstart-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  // The database (migrated), the queue and the worker pool, in one layer.
  const DocketLive = Docket.layer({ database: join(dir, "queue.db"), handlers: [Resize] })
  yield* program.pipe(Effect.scoped, Effect.provide(DocketLive))
}).pipe(Effect.scoped)

NodeRuntime.runMain(main)
