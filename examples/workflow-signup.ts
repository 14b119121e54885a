/**
 * A signup saga on Effect's own workflow API, run durably by Docket: charge
 * the card, provision the account, mail the welcome. Each step is an
 * activity (its result stored: a restart replays the workflow without
 * charging twice); a step that fails makes the workflow fail, and the steps
 * before it are compensated in reverse (the account removed, the charge
 * refunded).
 *
 *   npx tsx examples/workflow-signup.ts
 *
 * The billing, provisioning and mail services are one real HTTP server on
 * loopback; provisioning refuses the address "taken@example.com". Runs on a
 * SQLite file of its own (or DOCKET_DATABASE_URL), prints each call the
 * services received, then each signup's outcome.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Activity, Workflow } from "@effect/workflow"
import * as Workflows from "docket/Workflows"
import { Console, Effect, Exit, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

class StepFailed extends Schema.TaggedError<StepFailed>()("StepFailed", { step: Schema.String, status: Schema.Number }) {}

// The services: each POST is logged; provisioning refuses one address.
const services = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
    const server = createServer((req, res) => {
      let body = ""
      req.setEncoding("utf8").on("data", (chunk: string) => (body += chunk)).on("end", () => {
        const refused = req.url === "/accounts" && body.includes("taken@example.com")
        console.log(`  service: ${req.method} ${req.url} ${body}${refused ? " -> 409" : ""}`)
        res.writeHead(refused ? 409 : 200, { "content-type": "application/json" }).end(JSON.stringify({ id: `${req.url!.slice(1)}-1` }))
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() })))
  }),
  (s) => Effect.sync(s.close)
)

const post = (base: string, step: string, path: string, body: object) =>
  Effect.tryPromise(() =>
    fetch(`${base}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } })
  ).pipe(
    Effect.orDie,
    Effect.flatMap((res) => res.ok ? Effect.promise(() => res.json() as Promise<{ id: string }>) : Effect.fail(new StepFailed({ step, status: res.status })))
  )

// The workflow: its payload, result, error, and the key that makes an execution (one per email).
const Signup = Workflow.make({
  name: "Signup",
  payload: { email: Schema.String, plan: Schema.String },
  success: Schema.String,
  error: StepFailed,
  idempotencyKey: ({ email }) => email
})

const SignupLive = (base: string) =>
  Signup.toLayer(({ email, plan }) =>
    Effect.gen(function*() {
      const charge = yield* Activity.make({
        name: "charge",
        success: Schema.String,
        error: StepFailed,
        execute: Effect.map(post(base, "charge", "/charges", { email, plan }), (r) => r.id)
      }).pipe(Signup.withCompensation((id) => Effect.orDie(post(base, "refund", "/refunds", { charge: id }))))
      const account = yield* Activity.make({
        name: "provision",
        success: Schema.String,
        error: StepFailed,
        execute: Effect.map(post(base, "provision", "/accounts", { email }), (r) => r.id)
      }).pipe(Signup.withCompensation((id) => Effect.orDie(post(base, "deprovision", "/accounts/delete", { account: id }))))
      yield* Activity.make({
        name: "welcome",
        error: StepFailed,
        execute: Effect.asVoid(post(base, "mail", "/mail", { to: email, template: "welcome" }))
      })
      return `${email}: ${account}, charged ${charge}`
    })
  )

const program = Effect.gen(function*() {
  for (const email of ["ada@example.com", "taken@example.com"]) {
    console.log(`signup ${email}`)
    const exit = yield* Effect.exit(Signup.execute({ email, plan: "pro" }))
    yield* Console.log(
      Exit.match(exit, {
        onSuccess: (done) => `signed up ${done}`,
        onFailure: (cause) => `signup failed and was compensated: ${cause._tag === "Fail" ? `${cause.error.step} answered ${cause.error.status}` : "defect"}`
      })
    )
  }
})

const main = Effect.gen(function*() {
  const { url } = yield* services
  const dir = mkdtempSync(join(tmpdir(), "docket-signup-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const database = process.env.DOCKET_DATABASE_URL ?? join(dir, "signup.db")
  yield* program.pipe(Effect.provide(Workflows.layer({ database, handlers: [], workflows: SignupLive(url) })))
})

NodeRuntime.runMain(Effect.scoped(main))
