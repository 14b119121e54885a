/**
 * Delivering webhooks: each delivery is an item; a 2xx is done, a 5xx (or a
 * network error) is retried after a short backoff, and a 410 Gone is
 * `Permanent`: dead at once, however many attempts remain, because the
 * endpoint will never take it.
 *
 * A real HTTP server on a loopback port plays the subscribers: /hooks/ok
 * answers 200, /hooks/flaky answers 500 twice and then 200, /hooks/gone 410.
 *
 *   npx tsx examples/webhooks.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { Backoff, Docket, Handler, Permanent, QueueRepo, Retry, Worker } from "docket"
import { Console, Effect, Queue, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The subscribers' server: what each endpoint answers, and what it received. */
const subscribers = Effect.acquireRelease(
  Effect.async<{ base: string; hits: Map<string, number>; close: () => Promise<void> }>((resume) => {
    const hits = new Map<string, number>()
    const server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        const path = req.url ?? "/"
        const n = (hits.get(path) ?? 0) + 1
        hits.set(path, n)
        const status = path === "/hooks/ok" ? 200 : path === "/hooks/flaky" ? (n <= 2 ? 500 : 200) : path === "/hooks/gone" ? 410 : 404
        res.writeHead(status, { "content-type": "text/plain" }).end(`${status}\n`)
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(Effect.succeed({
        base: `http://127.0.0.1:${port}`,
        hits,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      }))
    })
  }),
  (s) => Effect.promise(s.close)
)

const Deliver = Handler.make("webhook.deliver", {
  payload: Schema.Struct({ url: Schema.String, event: Schema.String, data: Schema.Unknown }),
  backoff: Backoff.constant("50 millis"),
  maxAttempts: 6,
  timeout: "10 seconds",
  run: ({ data, event, url }, job) =>
    Effect.gen(function*() {
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", "x-event": event, "x-delivery": String(job.id) },
            body: JSON.stringify(data),
            signal
          }),
        catch: (error) => new Retry({ reason: `network error: ${String(error)}` })
      })
      yield* Effect.promise(() => response.arrayBuffer())
      if (response.status === 410) {
        return yield* new Permanent({ reason: `${url} answered 410 Gone: the subscription was removed` })
      }
      if (response.status < 200 || response.status >= 300) {
        return yield* new Retry({ reason: `${url} answered ${response.status}` })
      }
      yield* Console.log(`delivered ${event} to ${url} (item ${job.id}, attempt ${job.attempt})`)
    })
})

const main = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-webhooks-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const server = yield* subscribers
  const program = Effect.gen(function*() {
    const events = yield* Effect.flatMap(Worker.Worker, (worker) => worker.subscribe)
    const deliver = Docket.client(Deliver)
    const items = yield* deliver.enqueueMany(
      ["ok", "flaky", "gone"].map((name) => ({
        payload: { url: `${server.base}/hooks/${name}`, event: "order.paid", data: { order: 42 } }
      }))
    )
    const pending = new Set(items.map((r) => r.id))
    while (pending.size > 0) {
      const event = yield* Queue.take(events)
      if (event._tag === "Retried") yield* Console.log(`retrying item ${event.claim.id}: ${event.error}`)
      if (event._tag === "Completed") pending.delete(event.claim.id)
      if (event._tag === "Dead") {
        yield* Console.log(`item ${event.claim.id} is dead after attempt ${event.claim.attempt}: ${event.error}`)
        pending.delete(event.claim.id)
      }
    }
    const repo = yield* QueueRepo.QueueRepo
    const dead = yield* repo.listDead()
    const stats = yield* repo.stats
    yield* Console.log(
      `done: ${items.length - dead.length} delivered, ${dead.length} dead (kept for inspection: ${
        dead.map((d) => (d.payload as { url: string }).url.replace(server.base, "")).join(", ")
      }); queue: due ${stats.due}, scheduled ${stats.scheduled}, dead ${stats.dead}`
    )
    yield* Console.log(
      `requests received: ${[...server.hits].map(([path, n]) => `${path} ${n}`).join(", ")}`
    )
  })
  yield* program.pipe(
    Effect.scoped,
    Effect.provide(Docket.layer({ database: join(dir, "queue.db"), handlers: [Deliver] }))
  )
}).pipe(Effect.scoped)

NodeRuntime.runMain(main)
