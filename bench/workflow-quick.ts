// Quick: N executions of a 5-activity no-op workflow in one process; time from start to all complete.
import { Activity, Workflow } from "@effect/workflow"
import { Effect, Schema } from "effect"
import * as Workflows from "../src/Workflows.js"

const Five = Workflow.make({ name: "Five", payload: { n: Schema.Number }, success: Schema.Number, idempotencyKey: ({ n }) => `f${n}` })
const FiveLive = Five.toLayer(({ n }) =>
  Effect.gen(function*() {
    let sum = 0
    for (let s = 1; s <= Number(process.env.ACTS ?? 5); s++) sum += yield* Activity.make({ name: `s${s}`, success: Schema.Number, execute: Effect.succeed(s * n) })
    return sum
  }))
const N = Number(process.argv[3] ?? 200)
const main = Effect.gen(function*() {
  const t0 = performance.now()
  yield* Effect.forEach(Array.from({ length: N }, (_, i) => i + 1), (n) => Five.execute({ n }), { concurrency: "unbounded" })
  console.log(`${N} executions in ${Math.round(performance.now() - t0)} ms`)
})
await Effect.runPromise(main.pipe(Effect.provide(Workflows.layer({ database: process.argv[2]!, handlers: [], workflows: FiveLive, concurrency: 20 }))))
process.exit(0)
