/**
 * `docket enqueue --from <file>`: the items of an NDJSON file (or of stdin),
 * every line checked before the first is written, then all of them added in
 * one transaction, in batches.
 */
import { SqlClient } from "@effect/sql"
import { Console, Effect, Option, Stream } from "effect"
import { createReadStream, createWriteStream, existsSync, mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { pipeline } from "node:stream/promises"
import type * as QueueRepo from "../../QueueRepo.js"
import { usage } from "../errors.js"
import { plural } from "../format.js"
import { looksLikeOption, parseBulkLine, unknownOption } from "../input.js"
import { databaseUrl, fromEither } from "../options.js"
import { withRepo } from "../queue.js"
import type { EnqueueArgs } from "./enqueueOptions.js"

const BATCH = 1000

/** Streams the lines of a bulk file as checked requests, in batches. */
const bulkBatches = (path: string) =>
  Stream.fromAsyncIterable(
    createInterface({ input: createReadStream(path, { encoding: "utf8" }), crlfDelay: Infinity }),
    (error) => usage(`--from: cannot read ${path}: ${(error as Error).message}`)
  ).pipe(
    Stream.zipWithIndex,
    Stream.filter(([line]) => line.trim() !== ""),
    Stream.mapEffect(([line, index]) => fromEither(parseBulkLine(line, index + 1))),
    Stream.grouped(BATCH)
  )

/** Adds the items of `from` (a file, or `-` for stdin); the per-item arguments and options are refused. */
export const enqueueBulk = (args: EnqueueArgs, from: string) =>
  Effect.gen(function*() {
    if (Option.isSome(args.kind) || Option.isSome(args.payload)) {
      const extra = Option.getOrElse(args.kind, () => "")
      return yield* (looksLikeOption(extra) ? unknownOption(extra) : usage("--from takes no kind or payload argument"))
    }
    const perItem = ([args.key, args.delay, args.runAt, args.priority, args.maxAttempts] as ReadonlyArray<Option.Option<unknown>>)
      .some(Option.isSome)
    if (perItem) {
      return yield* usage("--from takes no --key, --delay, --run-at, --priority or --max-attempts (give them per line)")
    }
    // stdin is spooled to a temporary file, so it can be checked in full before anything is written.
    const path = from === "-" ? yield* spoolStdin : from
    if (!existsSync(path)) return yield* usage(`--from: file ${from} does not exist`)
    if (!statSync(path).isFile()) return yield* usage(`--from: ${from} is not a file`)
    // First pass: every line checked, nothing opened.
    const count = yield* Stream.runFold(bulkBatches(path), 0, (n, batch) => n + batch.length)
    if (count === 0) return yield* Console.log(`no items in ${from === "-" ? "stdin" : from}`)
    // Second pass: the batches go through the bulk path in one transaction (all or nothing).
    const totals = yield* withRepo(databaseUrl(args.database), (repo) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(insertAll(repo, path))))
    yield* Console.log(
      `enqueued ${plural(totals.enqueued, "item")}` +
        (totals.deduplicated > 0 ? ` (${totals.deduplicated} deduplicated)` : "")
    )
  }).pipe(Effect.scoped)

const insertAll = (repo: QueueRepo.Service, path: string) =>
  Effect.gen(function*() {
    const totals = { enqueued: 0, deduplicated: 0 }
    yield* Stream.runForEach(bulkBatches(path), (batch) =>
      Effect.map(repo.enqueueMany([...batch]), (results) => {
        for (const r of results) {
          if (r._tag === "Enqueued") totals.enqueued++
          else totals.deduplicated++
        }
      }))
    return totals
  })

const spoolStdin = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-stdin-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(
  Effect.flatMap((dir) =>
    Effect.tryPromise({
      try: async () => {
        const path = join(dir, "items.ndjson")
        await pipeline(process.stdin, createWriteStream(path))
        return path
      },
      catch: (error) => usage(`--from -: cannot read stdin: ${(error as Error).message}`)
    })
  )
)
