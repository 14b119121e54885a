/**
 * SQLite wake-ups across processes (issue 19): a pool picks up an item that
 * another process enqueued into the same file without waiting for its poll
 * (set to 60 s here, so only the watch can explain a pickup within the
 * bounded waits below), the watch of the file's directory lasts as long as a
 * pool listens, and a watch that cannot be opened or fails leaves the pool to
 * its poll. Real parts: a SQLite file, `docket enqueue` and `docket worker`
 * child processes, the inotify watches this process holds
 * (/proc/self/fdinfo). Speed belongs in bench/sqlite-wakeup.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Schema } from "effect"
import { EventEmitter } from "node:events"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, type watch, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Docket, Handler, QueueRepo, Worker } from "../src/index.js"
import * as SqliteWatch from "../src/internal/sqliteWatch.js"
import { DOCKET_URL, docket } from "./support/cli.js"
import { startWorker, stopWorker, waitFor } from "./reliability/support.js"

const POLL = "60 seconds"
// Well before the poll: only a wake-up explains a pickup this soon.
const BEFORE_POLL_MS = 20_000
const quiet = Logger.minimumLogLevel(LogLevel.Warning)

const tempDir = () => mkdtempSync(join(tmpdir(), "docket-wake-test-"))

// The inotify watches of this process on the directory `dir` (Linux: one
// "inotify wd:" line per watch in the fdinfo of libuv's inotify descriptor).
const watchesOn = (dir: string): number => {
  const ino = statSync(dir).ino.toString(16)
  let n = 0
  for (const fd of readdirSync("/proc/self/fdinfo")) {
    let info: string
    try {
      info = readFileSync(`/proc/self/fdinfo/${fd}`, "utf8")
    } catch {
      continue
    }
    for (const line of info.split("\n")) if (line.startsWith("inotify ") && line.includes(` ino:${ino} `)) n++
  }
  return n
}
const linux = process.platform === "linux"

const Payload = Schema.Struct({ n: Schema.Number })

const poolIn = (file: string, ran: Array<number>) =>
  ManagedRuntime.make(
    Docket.layer({
      database: file,
      poll: POLL,
      handlers: [Handler.make("wake", { payload: Payload, run: ({ n }) => Effect.sync(() => ran.push(n)) })]
    }).pipe(Layer.provide(quiet))
  )

describe("SQLite wake-ups across processes", () => {
  it("a pool in this process starts items `docket enqueue` adds from another process, before its poll", async () => {
    const dir = tempDir()
    const file = join(dir, "q.db")
    const ran: Array<number> = []
    const runtime = poolIn(file, ran)
    try {
      await runtime.runPromise(Worker.Worker)
      if (linux) expect(watchesOn(dir)).toBe(1)
      for (const n of [1, 2]) {
        // Idle: the last claim found nothing, the claimer sleeps for the poll.
        await runtime.runPromise(Effect.flatMap(Worker.Worker, (w) => w.whenIdle))
        const added = await docket(["enqueue", "-d", file, "wake", JSON.stringify({ n })])
        expect(added.code, added.stderr).toBe(0)
        await waitFor(`item ${n} to run`, () => ran.includes(n), BEFORE_POLL_MS, 10)
      }
    } finally {
      await runtime.dispose()
    }
    // The watch closed with the pool's scope.
    if (linux) expect(watchesOn(dir)).toBe(0)
    rmSync(dir, { recursive: true, force: true })
  }, 180_000)

  it("a `docket worker` process starts items this process adds, before its poll", async () => {
    const dir = tempDir()
    const file = join(dir, "q.db")
    const tasks = join(dir, "tasks")
    mkdirSync(tasks)
    writeFileSync(join(tasks, "wake.mjs"), "export default async () => {}\n")
    const client = ManagedRuntime.make(Docket.layerClient(file).pipe(Layer.provide(quiet)))
    const worker = startWorker({ database: file, tasks, args: ["--poll", "60s"] })
    try {
      const repo = await client.runPromise(QueueRepo.QueueRepo)
      // An application that only enqueues watches nothing.
      if (linux) expect(watchesOn(dir)).toBe(0)
      await worker.ready()
      for (const n of [1, 2]) {
        const added = await Effect.runPromise(repo.enqueue("wake", { n }))
        if (added._tag !== "Enqueued") throw new Error("not enqueued")
        await waitFor(`item ${n} to finish in the worker`, async () => {
          const item = await Effect.runPromise(repo.get(added.id))
          return Option.match(item, { onNone: () => true, onSome: (i) => i.state === "done" })
        }, BEFORE_POLL_MS, 20)
      }
    } finally {
      await stopWorker(worker)
      await client.dispose()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)

  it.skipIf(!linux)("a database reached through a symbolic link is watched where its file is", async () => {
    const real = tempDir()
    const links = tempDir()
    const runtime = poolIn(join(links, "q.db"), [])
    try {
      // The file exists once migrated; then the link to it.
      await ManagedRuntime.make(Docket.layerClient(join(real, "q.db")).pipe(Layer.provide(quiet))).dispose()
      symlinkSync(join(real, "q.db"), join(links, "q.db"))
      await runtime.runPromise(Worker.Worker)
      expect(watchesOn(real)).toBe(1)
      expect(watchesOn(links)).toBe(0)
    } finally {
      await runtime.dispose()
      rmSync(real, { recursive: true, force: true })
      rmSync(links, { recursive: true, force: true })
    }
  })

  it("an in-memory database is not watched", () => {
    expect(SqliteWatch.watchable(":memory:")).toBe(false)
    expect(SqliteWatch.watchable("")).toBe(false)
    expect(SqliteWatch.watchable("file::memory:?cache=shared")).toBe(false)
    expect(SqliteWatch.watchable("./docket.db")).toBe(true)
  })

  it.effect("a watch that cannot be opened, or fails later, is logged once and crashes nothing", () => {
    const logs: Array<string> = []
    return Effect.gen(function*() {
      // Fails to open (as fs.watch does on ENOSPC: no inotify watches left).
      const refused = SqliteWatch.make(join(tmpdir(), "x.db"), (() => {
        throw new Error("ENOSPC: System limit for number of file watchers reached")
      }) as unknown as typeof watch)
      yield* Effect.scoped(Effect.zipRight(refused.subscribe(() => {}), refused.subscribe(() => {})))
      expect(refused.active()).toBe(false)
      // Opens, then reports an error.
      const emitter = Object.assign(new EventEmitter(), { close: () => {} })
      const failing = SqliteWatch.make(join(tmpdir(), "y.db"), (() => emitter) as unknown as typeof watch)
      yield* Effect.scoped(Effect.gen(function*() {
        yield* failing.subscribe(() => {})
        expect(failing.active()).toBe(true)
        emitter.emit("error", new Error("EIO"))
        expect(failing.active()).toBe(false)
        yield* failing.subscribe(() => {})
        expect(failing.active()).toBe(false)
      }))
      yield* Effect.yieldNow()
      expect(logs.filter((l) => l.includes("cannot watch"))).toHaveLength(2)
      expect(logs.some((l) => l.includes("ENOSPC"))).toBe(true)
      expect(logs.some((l) => l.includes("EIO"))).toBe(true)
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => {
      logs.push(String(message))
    }))))
  })
})
