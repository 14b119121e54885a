/**
 * `docket worker` running: the task files loaded, the pool started over the
 * queue's database, shown (status line or log lines) until SIGINT/SIGTERM,
 * then stopped gracefully. Loaded by worker.ts once the options are read.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Docket from "../../Docket.js"
import type { Retention } from "../../Domain.js"
import type * as Worker from "../../Worker.js"
import { plural } from "../format.js"
import * as Graceful from "../graceful.js"
import { releaseYoungGeneration } from "../heapGrowth.js"
import { readPeriod } from "../input.js"
import type { LogOptions } from "../logFormat.js"
import { describeDatabase } from "../queue.js"
import { describeRetention } from "../retention.js"
import { printRecord, setLogFormat, show } from "../status.js"
import { loadTasks } from "../tasks.js"

/** The worker's checked options; durations in milliseconds. */
export interface RunOptions {
  readonly url: string
  /** PostgreSQL: the LISTEN connection's own URL (`Database.Options.listenDatabase`). */
  readonly listenDatabase: string | undefined
  /** PostgreSQL's schema for Docket's objects (undefined: public). */
  readonly schema: string | undefined
  readonly tasks: string
  readonly concurrency: number
  readonly lease: number
  readonly poll: number
  readonly grace: number
  readonly allKinds: boolean
  readonly retention: Retention
  readonly log: LogOptions
  /** When the pool warns that the xmin horizon is held back (PostgreSQL). */
  readonly horizon: { readonly age: number; readonly transactions: number }
}

/** The stopped line: what this worker did, from its counters. */
const stoppedRecord = (id: string, c: Worker.Counters) => ({
  level: "info" as const,
  event: "worker stopped",
  message: `docket worker stopped: done ${c.completed}, retried ${c.retried}, dead ${c.dead}, ` +
    `given back ${c.released}, cancelled ${c.cancelled}${c.snoozed > 0 ? `, snoozed ${c.snoozed}` : ""}` +
    `${c.pruned > 0 ? `, pruned ${c.pruned}` : ""}`,
  fields: {
    worker: id,
    done: c.completed,
    retried: c.retried,
    dead: c.dead,
    released: c.released,
    cancelled: c.cancelled,
    snoozed: c.snoozed,
    pruned: c.pruned
  }
})

/**
 * The young generation is held while the pool idles and let grow once it has
 * claimed an item (heap.ts): released when it is started, the rest of the
 * start grew it back (95 MB of RSS at rest instead of 88). Looked at once a
 * second until then.
 */
const releaseAtFirstClaim = (worker: Worker.Service) =>
  worker.counters.pipe(
    Effect.repeat({ schedule: Schedule.spaced("1 second"), until: (c) => c.claimed > 0 }),
    Effect.zipRight(Effect.sync(releaseYoungGeneration)),
    Effect.forkScoped
  )

/** Runs a worker over a folder of task files until interrupted (SIGINT/SIGTERM). */
export const runWorker = (options: RunOptions) =>
  Effect.gen(function*() {
    yield* setLogFormat(options.log.format)
    const { handlers, recurring } = yield* loadTasks(options.tasks)
    const graceMs = options.grace
    let service: Worker.Service | undefined
    yield* Effect.gen(function*() {
      const pool = yield* Graceful.start({
        handlers,
        concurrency: options.concurrency,
        lease: options.lease,
        poll: options.poll,
        grace: graceMs,
        claimKinds: options.allKinds ? "all" : "handled",
        recurring,
        horizon: options.horizon
      })
      const worker = pool.worker
      service = worker
      yield* releaseAtFirstClaim(worker)
      // Shown until after the pool stopped, so the items finishing in the grace show too. The status
      // line only in a terminal, and only when no log option asks for lines.
      const statusLine = process.stdout.isTTY === true && options.log.format === "text" && !options.log.items
      yield* show(worker, statusLine, options.log)
      const kinds = handlers.map((h) => h.kind)
      yield* printRecord({
        level: "info",
        event: "worker started",
        message: `docket worker ${worker.id} started on ${describeDatabase(options.url, options.schema)}: ` +
          `${plural(handlers.length, "kind")} (${kinds.join(", ")}), ` +
          `concurrency ${options.concurrency}` +
          (recurring.length === 0 ? "" : `, recurring ${recurring.map((r) => `${r.name} (${r.cron})`).join(", ")}`) +
          `; keeps finished items: ${describeRetention(options.retention, readPeriod)}`,
        fields: { worker: worker.id, database: describeDatabase(options.url, options.schema), kinds, concurrency: options.concurrency }
      })
      return yield* Effect.never.pipe(
        Effect.onInterrupt(() =>
          worker.counters.pipe(
            Effect.flatMap((c) =>
              printRecord({
                level: "info",
                event: "worker stopping",
                message: `docket worker stopping: ${plural(c.running, "running item")} may finish within ${graceMs} ms`,
                fields: { worker: worker.id, running: c.running, graceMs }
              })
            ),
            Effect.zipRight(pool.stop)
          )
        )
      )
    }).pipe(
      Effect.scoped,
      Effect.provide(Docket.layerClient(options.url, {
        repo: { retention: options.retention },
        databaseOptions: { listenDatabase: options.listenDatabase, schema: options.schema }
      })),
      Effect.onInterrupt(() =>
        service === undefined
          ? Effect.void
          : Effect.flatMap(service.counters, (c) => printRecord(stoppedRecord(service!.id, c)))
      )
    )
  })
