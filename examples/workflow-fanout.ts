/**
 * A fan-out of child workflows joined by their parent, run durably by Docket:
 * an event is delivered to every subscriber's webhook, each delivery a child
 * workflow of its own (its own execution, retries and history), and the
 * parent resumes when the last child finishes. While the children run, the
 * parent holds no slot: it is suspended, and each child's completion wakes it.
 *
 *   npx tsx examples/workflow-fanout.ts
 *
 * The subscribers are one real HTTP server on loopback; /hooks/b answers 503
 * to its first two deliveries (the child's activity retries it). Runs on a
 * SQLite file of its own (or DOCKET_DATABASE_URL).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Activity, Workflow } from "@effect/workflow"
import * as Workflows from "docket/Workflows"
import { Console, Effect, Layer, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

class DeliveryFailed extends Schema.TaggedError<DeliveryFailed>()("DeliveryFailed", { status: Schema.Number }) {}

const subscribers = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
    const seen = new Map<string, number>()
    const server = createServer((req, res) => {
      req.resume().on("end", () => {
        const n = (seen.get(req.url!) ?? 0) + 1
        seen.set(req.url!, n)
        const status = req.url === "/hooks/b" && n <= 2 ? 503 : 204
        console.log(`  subscriber ${req.url} delivery ${n}: ${status}`)
        res.writeHead(status).end()
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() })))
  }),
  (s) => Effect.sync(s.close)
)

// A child: one delivery, retried up to 5 times (each attempt's outcome stored).
const Deliver = Workflow.make({
  name: "Deliver",
  payload: { event: Schema.String, endpoint: Schema.String },
  success: Schema.Number,
  error: DeliveryFailed,
  idempotencyKey: ({ endpoint, event }) => `${event}->${endpoint}`
})
const DeliverLive = Deliver.toLayer(({ endpoint, event }) =>
  Activity.make({
    name: "post",
    success: Schema.Number,
    error: DeliveryFailed,
    execute: Effect.gen(function*() {
      const attempt = yield* Activity.CurrentAttempt
      const res = yield* Effect.orDie(Effect.tryPromise(() => fetch(endpoint, { method: "POST", body: event })))
      if (!res.ok) return yield* new DeliveryFailed({ status: res.status })
      return attempt
    })
  }).pipe(Activity.retry({ times: 5 }))
)

// The parent: a child per subscriber, all at once, joined.
const Broadcast = Workflow.make({
  name: "Broadcast",
  payload: { event: Schema.String, endpoints: Schema.Array(Schema.String) },
  success: Schema.String,
  error: DeliveryFailed,
  idempotencyKey: ({ event }) => event
})
const BroadcastLive = Broadcast.toLayer(({ endpoints, event }) =>
  Effect.gen(function*() {
    const attempts = yield* Effect.all(endpoints.map((endpoint) => Deliver.execute({ event, endpoint })), {
      concurrency: "unbounded"
    })
    return `${event} delivered to ${endpoints.length} subscribers in ${attempts.reduce((a, b) => a + b, 0)} attempts`
  })
)

const main = Effect.gen(function*() {
  const { url } = yield* subscribers
  const dir = mkdtempSync(join(tmpdir(), "docket-fanout-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const database = process.env.DOCKET_DATABASE_URL ?? join(dir, "fanout.db")
  const live = Workflows.layer({ database, handlers: [], workflows: Layer.mergeAll(DeliverLive, BroadcastLive) })
  const summary = yield* Broadcast.execute({
    event: "push:main@4f2a9c1",
    endpoints: ["a", "b", "c"].map((name) => `${url}/hooks/${name}`)
  }).pipe(Effect.provide(live))
  yield* Console.log(summary)
})

NodeRuntime.runMain(Effect.scoped(main))
