/**
 * `docket demo` running (loaded by demo.ts when the command runs): a worker over the example task files
 * on a fresh SQLite file, a mixed batch (some items succeed, some fail and
 * then succeed, one bad payload goes dead), the live status line, and a
 * summary once the work is done.
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import * as Docket from "../../Docket.js"
import * as QueueRepo from "../../QueueRepo.js"
import type * as Worker from "../../Worker.js"
import { CommandFailed } from "../errors.js"
import { errorLine } from "../format.js"
import * as Graceful from "../graceful.js"
import { describeDatabase } from "../queue.js"
import { printLine, show } from "../status.js"
import { loadTasks } from "../tasks.js"

const TASKS = fileURLToPath(new URL("../../../examples/tasks/", import.meta.url))

/** The demo's batch: 26 items of four kinds. */
export const demoBatch = (): ReadonlyArray<QueueRepo.EnqueueRequest> => [
  ...["Ada", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret", "Alan", "Radia"].map((name) => ({
    kind: "greet",
    payload: { name }
  })),
  ...[64, 128, 256, 512, 1024, 2048].map((width) => ({ kind: "thumbnail.render", payload: { width } })),
  ...[1, 2, 1, 2, 1, 1].map((failures, i) => ({ kind: "flaky", payload: { failures }, key: `flaky-${i}` })),
  ...["2025-01", "2025-02", "2025-03"].map((month, i) => ({
    kind: "report.build",
    payload: { month },
    delay: 300 * (i + 1)
  })),
  // A payload that does not match greet's schema: dead at once, never retried.
  { kind: "greet", payload: { name: 42 } }
]

const shellQuote = (text: string) => (/^[\w./:@%+-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`)

const waitUntilDone = (repo: QueueRepo.Service, worker: Worker.Service, kinds: ReadonlyArray<string>) => {
  const pending = Effect.map(repo.stats, (stats) =>
    kinds.reduce((n, kind) => {
      const c = stats.byKind[kind]
      return c === undefined ? n : n + c.due + c.scheduled + c.running
    }, 0))
  // Done when nothing waits or runs in the database and nothing is left in this worker.
  const done = Effect.flatMap(pending, (n) =>
    n > 0 ? Effect.succeed(false) : Effect.zipRight(worker.whenIdle, Effect.map(pending, (m) => m === 0)))
  return Effect.repeat(done, { schedule: Schedule.spaced("100 millis"), until: (finished) => finished }).pipe(
    Effect.timeoutFail({
      duration: "2 minutes",
      onTimeout: () => new CommandFailed({ reason: "the demo did not finish within 2 minutes" })
    })
  )
}

/** Runs the demo on `database`, else on a new SQLite file in a temporary folder. */
export const runDemo = (database: Option.Option<string>) =>
  Effect.gen(function*() {
    const url = Option.getOrElse(database, () => join(mkdtempSync(join(tmpdir(), "docket-demo-")), "docket.db"))
    const where = describeDatabase(url)
    const { handlers } = yield* loadTasks(TASKS)
    const kinds = handlers.map((h) => h.kind)
    const tasksDir = relative(process.cwd(), TASKS) || "."
    yield* Console.log(`Docket demo: a worker over ${tasksDir} (${kinds.join(", ")}) on ${where}`)
    const batch = demoBatch()
    const started = performance.now()
    const summary = yield* Effect.gen(function*() {
      const repo = yield* QueueRepo.QueueRepo
      const { worker } = yield* Graceful.start({ handlers, concurrency: 4, claimKinds: "handled", poll: "1 second" })
      yield* show(worker, process.stdout.isTTY === true)
      const results = yield* repo.enqueueMany(batch)
      yield* printLine(
        `enqueued ${results.length} items: 10 greet, 6 thumbnail.render, 6 flaky (fail once or twice, then succeed), ` +
          `3 report.build (due in 0.3-0.9 s) and 1 greet with a bad payload`
      )
      yield* waitUntilDone(repo, worker, kinds)
      const counters = yield* worker.counters
      const dead = yield* repo.listDead({ limit: 100 })
      return { counters, dead: dead.filter((item) => kinds.includes(item.kind)) }
    }).pipe(
      Effect.scoped,
      Effect.provide(Docket.layerClient(url))
    )
    const seconds = (performance.now() - started) / 1000
    const { counters, dead } = summary
    const db = shellQuote(url)
    const lines = [
      "",
      `Done in ${seconds.toFixed(1)} s: ${counters.completed} items done, ${counters.retried} failed attempts retried, ` +
        `${counters.dead} dead.`
    ]
    if (dead.length > 0) {
      lines.push(`Dead items stay in ${where} until you retry or delete them:`)
      for (const item of dead) {
        lines.push(`  #${item.id} ${item.kind} ${JSON.stringify(item.payload)}: ${errorLine(item.lastError ?? "")}`)
      }
      lines.push(
        "See them, retry them or delete them with:",
        `  npx docket dead list --database ${db}`,
        `  npx docket dead retry --all --database ${db}`,
        `  npx docket dead delete --all --database ${db}`
      )
    }
    lines.push(
      `What ran, kept for 24 h (its attempts' errors and results): npx docket list --state done --database ${db}`,
      `Queue counts: npx docket stats --database ${db}`,
      `All of it in a browser (http://127.0.0.1:4680/): npx docket dashboard --database ${db}`
    )
    yield* Console.log(lines.join("\n"))
  })
