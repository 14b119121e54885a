/**
 * A migrator in its own process, for the migration race tests: opens the
 * database named by argv[2] (without migrating), prints "ready", waits for a
 * line on stdin (the barrier: every racer is connected before any migrates),
 * runs the migrations and prints `{"applied":[...]}` or `{"error":"..."}`.
 *
 * Run as: node --import tsx test/support/migrateProcess.ts <url>
 */
import { Effect } from "effect"
import * as Database from "../../src/Database.js"
import * as Migrations from "../../src/Migrations.js"

const url = process.argv[2]

const program = Effect.gen(function*() {
  process.stdout.write("ready\n")
  yield* Effect.async<void>((resume) => {
    process.stdin.once("data", () => resume(Effect.void))
  })
  const applied = yield* Migrations.run
  process.stdout.write(`${JSON.stringify({ applied })}\n`)
}).pipe(Effect.provide(Database.layer(url, { migrate: false })))

Effect.runPromise(program).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stdout.write(`${JSON.stringify({ error: String(error) })}\n`)
    process.exit(1)
  }
)
