/**
 * An approval that waits, durably, for a decision made in another process:
 * a refund workflow asks for approval and awaits a `DurableDeferred`. While
 * it waits it is suspended: rows in the database, no slot, no lease, no
 * connection. A person approves it from the command line with the
 * deferred's token:
 *
 *   docket workflow complete <token> --value '"approved by ada"'
 *
 * and the workflow resumes (in whichever process runs its pool) and pays.
 *
 *   npx tsx examples/workflow-approval.ts
 *
 * The example runs that command itself, as a separate process
 * (`node bin/docket.mjs`), on its SQLite file (or DOCKET_DATABASE_URL), and
 * prints what `docket workflow show` says before and after.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Activity, DurableDeferred, Workflow } from "@effect/workflow"
import * as Workflows from "docket/Workflows"
import { Console, Effect, Schema } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const Decision = DurableDeferred.make("decision", { success: Schema.String })

const Refund = Workflow.make({
  name: "Refund",
  payload: { order: Schema.String, amount: Schema.Number },
  success: Schema.String,
  idempotencyKey: ({ order }) => order
})

const RefundLive = Refund.toLayer(({ amount, order }) =>
  Effect.gen(function*() {
    yield* Activity.make({ name: "ask", execute: Console.log(`refund of ${amount} EUR for ${order}: approval asked`) })
    const decision = yield* DurableDeferred.await(Decision)
    yield* Activity.make({ name: "pay", execute: Console.log(`refund of ${amount} EUR for ${order} paid (${decision})`) })
    return decision
  })
)

// The `docket` command, as a person runs it: another process.
const BIN = fileURLToPath(new URL("../bin/docket.mjs", import.meta.url))
const docket = (args: ReadonlyArray<string>) =>
  Effect.async<string, Error>((resume) => {
    execFile(process.execPath, [BIN, ...args], (error, stdout, stderr) =>
      resume(error ? Effect.fail(new Error(`docket ${args.join(" ")}: ${stderr || error.message}`)) : Effect.succeed(stdout)))
  })

const program = (database: string) =>
  Effect.gen(function*() {
    const payload = { order: "order-1042", amount: 80 }
    const id = yield* Refund.execute(payload, { discard: true })
    // Wait until it is suspended on the decision.
    let state = ""
    for (let i = 0; i < 500 && state !== "suspended"; i++) {
      state = JSON.parse(yield* docket(["workflow", "show", id, "--json", "--database", database])).state
      if (state !== "suspended") yield* Effect.sleep("20 millis")
    }
    yield* Console.log(`execution ${id.slice(0, 12)}... is ${state}, waiting for its decision`)
    const token = yield* DurableDeferred.tokenFromPayload(Decision, { workflow: Refund, payload })
    yield* Console.log(`$ docket workflow complete <token> --value '"approved by ada"'`)
    yield* docket(["workflow", "complete", token, "--value", JSON.stringify("approved by ada"), "--database", database])
    const decision = yield* Refund.execute(payload) // joins the execution: its result
    yield* Console.log(`workflow result: ${decision}`)
    const shown = JSON.parse(yield* docket(["workflow", "show", id, "--json", "--database", database]))
    yield* Console.log(`docket workflow show: ${shown.state}, activities ${shown.activities.map((a: { name: string }) => a.name).join(", ")}`)
  })

const main = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "docket-approval-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const database = process.env.DOCKET_DATABASE_URL ?? join(dir, "approval.db")
  yield* program(database).pipe(Effect.provide(Workflows.layer({ database, handlers: [], workflows: RefundLive })))
})

NodeRuntime.runMain(Effect.scoped(main))
