/**
 * Docket inside an application: an HTTP server (@effect/platform-node) whose
 * POST /signup enqueues a welcome mail, with `Docket.layer` in the same
 * program. The request returns at once (202) with the item's id; the worker
 * pool in the same process sends the mail a second later. A second signup of
 * the same address while its mail waits (a double click) is deduplicated: the
 * dedupe key is the address.
 *
 * The example makes its own requests, waits for the mails, then ends: the
 * layers are released in order, so the HTTP server stops and the worker pool
 * shuts down gracefully.
 *
 *   npx tsx examples/app-layer.ts
 */
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Backoff, Docket, Handler, Worker } from "docket"
import { Console, Effect, Layer, Queue, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"

const Signup = Schema.Struct({ email: Schema.String.pipe(Schema.pattern(/^[^@\s]+@[^@\s]+$/)), name: Schema.String })

const WelcomeMail = Handler.make("mail.welcome", {
  payload: Signup,
  backoff: Backoff.constant("50 millis"),
  run: ({ email, name }, job) => Console.log(`worker: welcome mail sent to ${name} <${email}> (item ${job.id})`)
})

// POST /signup {email, name}: 202 with the queued item's id; 400 on a bad body.
const router = HttpRouter.empty.pipe(
  HttpRouter.post(
    "/signup",
    Effect.gen(function*() {
      const signup = yield* HttpServerRequest.schemaBodyJson(Signup)
      const result = yield* Docket.client(WelcomeMail).enqueue(signup, { key: signup.email, delay: "1 second" })
      return yield* HttpServerResponse.json({ id: result.id, deduplicated: result._tag === "Deduplicated" }, {
        status: 202
      })
    }).pipe(
      Effect.catchTag("ParseError", () => HttpServerResponse.json({ error: "expected {email, name}" }, { status: 400 }))
    )
  )
)

const program = Effect.gen(function*() {
  const port = yield* HttpServer.addressWith((address) =>
    Effect.succeed(address._tag === "TcpAddress" ? address.port : 0)
  )
  yield* Console.log(`listening on http://127.0.0.1:${port}`)
  const events = yield* Effect.flatMap(Worker.Worker, (worker) => worker.subscribe)

  const signup = (body: unknown) =>
    Effect.promise(async () => {
      const response = await fetch(`http://127.0.0.1:${port}/signup`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      return `${response.status} ${await response.text()}`
    })
  for (
    const body of [
      { email: "ada@example.com", name: "Ada" },
      { email: "ada@example.com", name: "Ada" },
      { email: "grace@example.com", name: "Grace" },
      { email: "not an address", name: "?" }
    ]
  ) {
    yield* Console.log(`POST /signup ${JSON.stringify(body)} -> ${yield* signup(body)}`)
  }

  // Two mails: Ada's (asked for twice) and Grace's.
  let sent = 0
  while (sent < 2) {
    const event = yield* Queue.take(events)
    if (event._tag === "Completed") sent++
  }
  yield* Console.log("2 welcome mails sent; shutting down")
})

const main = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-app-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const DocketLive = Docket.layer({ database: join(dir, "queue.db"), handlers: [WelcomeMail] })
  const ServerLive = NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })
  // The HTTP app served on the server, with the queue (and the pool) it uses.
  const HttpLive = HttpServer.serve(router).pipe(Layer.provideMerge(ServerLive))
  const AppLive = HttpLive.pipe(Layer.provideMerge(DocketLive))
  yield* program.pipe(Effect.provide(AppLive))
  yield* Console.log("stopped: HTTP server closed, worker pool shut down")
}).pipe(Effect.scoped)

NodeRuntime.runMain(main)
