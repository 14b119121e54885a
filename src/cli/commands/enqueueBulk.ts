/**
 * `docket enqueue --from <file>`: the items of an NDJSON file (or of stdin),
 * all added in one transaction or none. The file is read once, in large
 * chunks: each batch of lines is checked, then inserted while the next batch
 * is read and checked, so the command's CPU overlaps the database's. A bad
 * line fails the transaction (rolled back: nothing is written) and is named by
 * its line number; a bad line in the first batch, or an empty file, is refused
 * before the database is opened. (It used to check the whole file in a first
 * pass: that pass cost a third of the command for nothing written, measured
 * in docs/benchmarks.md, "Bulk enqueue from the command".)
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { createReadStream, existsSync, statSync } from "node:fs"
import type * as QueueRepo from "../../QueueRepo.js"
import { CHUNK_BYTES, type LineBatch, lineBatches } from "../bulkFile.js"
import { usage, type UsageError } from "../errors.js"
import { plural } from "../format.js"
import { releaseYoungGeneration } from "../heapGrowth.js"
import { looksLikeOption, parseBulkLine, unknownOption } from "../input.js"
import { withRepo } from "../queue.js"
import type { EnqueueArgs } from "./enqueueOptions.js"

// Lines per enqueueMany call (one INSERT statement). Measured on PostgreSQL,
// 100,000 rows in one transaction: 2,000 1.8 s, 5,000 1.15 s, 10,000 1.06 s, 20,000 1.10 s.
const BATCH = 10_000

type Batches = AsyncIterator<LineBatch>

/** The next batch of `batches` as checked requests, or none at the end of the input. */
const nextRequests = (batches: Batches, name: string) =>
  Effect.tryPromise({
    try: () => batches.next(),
    catch: (error) => usage(`--from: cannot read ${name}: ${(error as Error).message}`)
  }).pipe(Effect.flatMap((next) => next.done === true ? Effect.succeed(Option.none()) : Effect.map(parseBatch(next.value), Option.some)))

const parseBatch = ({ lines, numbers }: LineBatch): Effect.Effect<Array<QueueRepo.EnqueueRequest>, UsageError> =>
  Effect.suspend(() => {
    const requests: Array<QueueRepo.EnqueueRequest> = new Array(lines.length)
    for (let i = 0; i < lines.length; i++) {
      const request = parseBulkLine(lines[i], numbers[i])
      if (Either.isLeft(request)) return Effect.fail(request.left)
      requests[i] = request.right
    }
    return Effect.succeed(requests)
  })

/** Adds the items of `from` (a file, or `-` for stdin); the per-item arguments and options are refused. */
export const enqueueBulk = (args: EnqueueArgs, from: string) =>
  Effect.gen(function*() {
    // A bulk file's batches may grow the young generation as before (heap.ts).
    releaseYoungGeneration()
    if (Option.isSome(args.kind) || Option.isSome(args.payload)) {
      const extra = Option.getOrElse(args.kind, () => "")
      return yield* (looksLikeOption(extra) ? unknownOption(extra) : usage("--from takes no kind or payload argument"))
    }
    const perItem = ([args.key, args.onConflict, args.group, args.delay, args.runAt, args.priority, args.maxAttempts] as ReadonlyArray<Option.Option<unknown>>)
      .some(Option.isSome)
    if (perItem) {
      return yield* usage("--from takes no --key, --on-conflict, --group, --delay, --run-at, --priority or --max-attempts (give them per line)")
    }
    if (from !== "-" && !existsSync(from)) return yield* usage(`--from: file ${from} does not exist`)
    if (from !== "-" && !statSync(from).isFile()) return yield* usage(`--from: ${from} is not a file`)
    const name = from === "-" ? "stdin" : from
    const input = from === "-" ? process.stdin : createReadStream(from, { highWaterMark: CHUNK_BYTES })
    const batches = yield* Effect.acquireRelease(
      Effect.sync(() => lineBatches(input, BATCH)),
      // Closes the input when the command stops early (a bad line, a failed insert).
      (generator) => Effect.tryPromise(() => generator.return(undefined)).pipe(Effect.ignore)
    )
    const first = yield* nextRequests(batches, name)
    if (Option.isNone(first)) return yield* Console.log(`no items in ${name}`)
    const totals = yield* withRepo(args.database, (repo) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(insertAll(repo, first.value, batches, name))))
    yield* Console.log(
      `enqueued ${plural(totals.enqueued, "item")}` +
        (totals.deduplicated > 0 ? ` (${totals.deduplicated} deduplicated)` : "") +
        (totals.replaced > 0 ? `; replaced ${plural(totals.replaced, "waiting item")}` : "")
    )
  }).pipe(Effect.scoped)

// Each batch's insert runs while the next batch is read and checked (the
// connection runs one statement at a time: only the reading overlaps). The
// results are counted, not kept: memory does not grow with the file.
const insertAll = (repo: QueueRepo.Service, first: Array<QueueRepo.EnqueueRequest>, batches: Batches, name: string) =>
  Effect.gen(function*() {
    const totals = { enqueued: 0, deduplicated: 0, replaced: 0 }
    let batch: Option.Option<Array<QueueRepo.EnqueueRequest>> = Option.some(first)
    while (Option.isSome(batch)) {
      const inserting = yield* Effect.fork(repo.enqueueMany(batch.value))
      const next = yield* Effect.either(nextRequests(batches, name))
      // The insert is awaited even when the next batch is bad: the rollback follows it.
      const results = yield* Fiber.join(inserting)
      for (const r of results) {
        if (r._tag === "Enqueued") totals.enqueued++
        else if (r._tag === "Replaced") totals.replaced++
        else totals.deduplicated++
      }
      if (Either.isLeft(next)) return yield* next.left
      batch = next.right
    }
    return totals
  })
