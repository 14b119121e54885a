/**
 * SQLite across processes (issue 19): how fast a worker pool starts an item
 * that ANOTHER process enqueued into the same file, and what watching for
 * such items costs an idle worker.
 *
 *   npx tsx bench/sqlite-wakeup.ts                         every mode
 *   npx tsx bench/sqlite-wakeup.ts --modes library,poll --items 100 --idle 20 --repeat 3
 *
 * Per mode, a fresh SQLite file and a worker child process (the library's
 * `Worker.layer`, concurrency 10, a no-op handler); this process is the other
 * process that enqueues (`QueueRepo.enqueue`, one item at a time, 40-60 ms
 * apart). Measured: pickup = the handler's start less the enqueue call's
 * return (both on the system's monotonic clock); the worker's CPU time
 * (`process.cpuUsage`) over an idle window, and the claims it made in it;
 * the claims made while draining a burst of items enqueued by this process
 * (own completions must not set off a storm of empty claims); and the
 * worker's own drain of items it enqueues itself (--self, default 20,000):
 * its rate, CPU per 1,000 items and claims, where every commit is its own and
 * every event of the watch wakes it for nothing. With --repeat,
 * the modes run in turn, round after round, and each figure is the median
 * over the rounds.
 *
 * Modes (all but `library` run the pool with `listen: false`, so without a
 * watch of its own; all but `poll` set its poll to 60 s; the others wake it
 * from a watcher of the bench's own through `Wakeups.enqueued`):
 * - poll: no watcher, the default 2 s poll (what SQLite did before);
 * - library: the pool as shipped (its own watch; poll 60 s; its wake-ups are
 *   not counted);
 * - dv-ded-N: `PRAGMA data_version` every N ms on a dedicated better-sqlite3
 *   connection (changes on every other connection's commit, this process's
 *   own connection included);
 * - dv-main-N: `PRAGMA data_version` every N ms through the pool's own
 *   SqlClient connection (changes only on other connections' commits);
 * - fswatch: `fs.watch` on the file's directory (inotify), the db and -wal
 *   names, every event a wake-up;
 * - watchfile-N: `fs.watchFile` (stat polling) of the -wal file every N ms.
 */
import Sqlite from "better-sqlite3"
import { Duration, Effect, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import { fork } from "node:child_process"
import { mkdtempSync, rmSync, watch, watchFile } from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { SqlClient } from "@effect/sql"
import { Database, Docket, Handler, QueueRepo, Wakeups, Worker } from "../src/index.js"

const KIND = "wake"
// The system's monotonic clock, one for every process (bench/lib/protocol.ts says why not timeOrigin).
const now = () => Number(process.hrtime.bigint()) / 1e6
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const quiet = Logger.minimumLogLevel(LogLevel.Warning)

type ToChild = { readonly _tag: "usage" } | { readonly _tag: "selfDrain"; readonly n: number }
type FromChild =
  | { readonly _tag: "ready" }
  | { readonly _tag: "start"; readonly i: number; readonly at: number }
  | { readonly _tag: "usage"; readonly cpuUs: number; readonly claims: number; readonly wakes: number }
  | { readonly _tag: "selfDrained"; readonly cpuUs: number; readonly ms: number; readonly claims: number }

// ---------------------------------------------------------------- the worker child

// The payloads of the items the worker enqueues itself start here.
const SELF = 1_000_000

const child = async (mode: string, file: string) => {
  let claims = 0
  let selfRan = 0
  let wakes = 0
  const send = (m: FromChild) => process.send?.(m)
  const handler = Handler.make(KIND, {
    payload: Schema.Struct({ i: Schema.Number }),
    // Items of the worker's own drain (SELF and up) are only counted.
    run: ({ i }) => Effect.sync(() => (i >= SELF ? selfRan++ : send({ _tag: "start", i, at: now() })))
  })
  const store = QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(file)))
  // The repository as the pool sees it, with its claims counted.
  const counted = Layer.effect(
    QueueRepo.QueueRepo,
    Effect.map(QueueRepo.QueueRepo, (repo): QueueRepo.Service => ({
      ...repo,
      claim: (request) => Effect.suspend(() => (claims++, repo.claim(request)))
    }))
  )
  const own = mode !== "poll" && mode !== "library"
  const pool = Worker.layer({
    handlers: [handler],
    concurrency: 10,
    poll: mode === "poll" ? Duration.seconds(2) : Duration.seconds(60),
    listen: mode === "library"
  })
  const runtime = ManagedRuntime.make(pool.pipe(Layer.provide(counted), Layer.provideMerge(store), Layer.provide(quiet)))
  const wakeups = await runtime.runPromise(Wakeups.Wakeups)
  const wake = () => {
    wakes++
    Effect.runSync(wakeups.enqueued)
  }
  const stops: Array<() => void> = []
  const every = (ms: number, f: () => void) => {
    const t = setInterval(f, ms)
    stops.push(() => clearInterval(t))
  }
  const [name, arg] = mode.split(/-(?=\d+$)/)
  const ms = Number(arg)
  if (name === "dv-ded") {
    const db = new Sqlite(file, { readonly: true })
    const stmt = db.prepare("PRAGMA data_version").pluck()
    let last = stmt.get()
    every(ms, () => {
      const v = stmt.get()
      if (v !== last) {
        last = v
        wake()
      }
    })
  } else if (name === "dv-main") {
    const sql = await runtime.runPromise(SqlClient.SqlClient)
    let last: unknown
    const read = sql.unsafe<{ data_version: number }>("PRAGMA data_version").pipe(
      Effect.map((rows) => rows[0]?.data_version),
      Effect.withTracerEnabled(false)
    )
    runtime.runFork(Effect.forever(Effect.zipRight(
      Effect.tap(read, (v) => {
        if (last !== undefined && v !== last) wake()
        last = v
      }),
      Effect.sleep(ms)
    )))
  } else if (name === "fswatch") {
    const base = basename(file)
    const w = watch(dirname(file), (_event, f) => {
      if (f === base || f === `${base}-wal`) wake()
    })
    stops.push(() => w.close())
  } else if (name === "watchfile") {
    watchFile(`${file}-wal`, { interval: ms, persistent: false }, wake)
  } else if (own) {
    throw new Error(`unknown mode ${mode}`)
  }
  const cpu = () => {
    const u = process.cpuUsage()
    return u.user + u.system
  }
  const selfDrain = async (n: number) => {
    const repo = await runtime.runPromise(QueueRepo.QueueRepo)
    const [c0, t0, k0] = [cpu(), now(), claims]
    selfRan = 0
    for (let k = 0; k < n; k += 2000) {
      const size = Math.min(2000, n - k)
      await Effect.runPromise(repo.enqueueMany(Array.from({ length: size }, (_, j) => ({ kind: KIND, payload: { i: SELF + k + j } }))))
    }
    while (selfRan < n) await sleep(2)
    send({ _tag: "selfDrained", cpuUs: cpu() - c0, ms: now() - t0, claims: claims - k0 })
  }
  process.on("message", (m: ToChild) => {
    if (m._tag === "usage") send({ _tag: "usage", cpuUs: cpu(), claims, wakes })
    else void selfDrain(m.n)
  })
  process.on("SIGTERM", () => {
    for (const stop of stops) stop()
    void runtime.dispose().then(() => process.exit(0))
  })
  send({ _tag: "ready" })
}

// ---------------------------------------------------------------- the enqueuing parent

interface Result {
  readonly mode: string
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly idleCpuPct: number
  readonly idleClaims: number
  readonly drainClaims: number
  readonly drainWakes: number
  readonly drainMs: number
  readonly selfRate: number
  readonly selfCpuPer1000: number
  readonly selfClaims: number
}

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN
}

const measure = async (mode: string, items: number, idleS: number, burst: number, selfN: number): Promise<Result> => {
  const dir = mkdtempSync(join(tmpdir(), "docket-wake-"))
  const file = join(dir, "q.db")
  const runtime = ManagedRuntime.make(Docket.layerClient(file).pipe(Layer.provide(quiet)))
  const repo = await runtime.runPromise(QueueRepo.QueueRepo)
  const proc = fork(fileURLToPath(import.meta.url), ["--child", mode, file], { execArgv: ["--import", "tsx"] })
  const starts = new Map<number, number>()
  let onUsage: ((u: Extract<FromChild, { _tag: "usage" }>) => void) | undefined
  let onDrained: ((u: Extract<FromChild, { _tag: "selfDrained" }>) => void) | undefined
  const ready = new Promise<void>((resolve) => {
    proc.on("message", (m: FromChild) => {
      if (m._tag === "ready") resolve()
      else if (m._tag === "start") starts.set(m.i, m.at)
      else if (m._tag === "usage") onUsage?.(m)
      else onDrained?.(m)
    })
  })
  const usage = () =>
    new Promise<Extract<FromChild, { _tag: "usage" }>>((resolve) => {
      onUsage = resolve
      proc.send({ _tag: "usage" } satisfies ToChild)
    })
  const selfDrain = (n: number) =>
    new Promise<Extract<FromChild, { _tag: "selfDrained" }>>((resolve) => {
      onDrained = resolve
      proc.send({ _tag: "selfDrain", n } satisfies ToChild)
    })
  const until = async (cond: () => boolean, ms: number, what: string) => {
    const end = Date.now() + ms
    while (!cond()) {
      if (Date.now() > end) throw new Error(`${mode}: timed out waiting for ${what}`)
      await sleep(5)
    }
  }
  try {
    await ready
    await sleep(1500) // past start-up (first claims, heartbeat)
    // Idle: CPU and claims over the window.
    const before = await usage()
    await sleep(idleS * 1000)
    const after = await usage()
    const idleCpuPct = ((after.cpuUs - before.cpuUs) / (idleS * 1e6)) * 100
    // Pickup: one at a time, 40-60 ms apart.
    const returned = new Map<number, number>()
    for (let i = 0; i < items; i++) {
      await Effect.runPromise(repo.enqueue(KIND, { i }))
      returned.set(i, now())
      await sleep(40 + Math.random() * 20)
    }
    await until(() => starts.size >= items, 10_000 + 2500 * items, "pickups")
    const pickups = [...returned].map(([i, at]) => (starts.get(i) ?? NaN) - at)
    // Drain a burst this process enqueues; count the worker's claims until idle again.
    const b0 = await usage()
    const t0 = now()
    await Effect.runPromise(repo.enqueueMany(Array.from({ length: burst }, (_, k) => ({ kind: KIND, payload: { i: items + k } }))))
    await until(() => starts.size >= items + burst, 120_000, "the burst")
    const drainMs = now() - t0
    await sleep(500)
    const b1 = await usage()
    // The worker's own drain: what its own commits cost it through the watch.
    const own = await selfDrain(selfN)
    return {
      mode,
      p50: percentile(pickups, 50),
      p99: percentile(pickups, 99),
      max: Math.max(...pickups),
      idleCpuPct,
      idleClaims: after.claims - before.claims,
      drainClaims: b1.claims - b0.claims,
      drainWakes: b1.wakes - b0.wakes,
      drainMs,
      selfRate: selfN / (own.ms / 1000),
      selfCpuPer1000: own.cpuUs / 1000 / (selfN / 1000),
      selfClaims: own.claims
    }
  } finally {
    proc.kill("SIGTERM")
    await new Promise((r) => proc.once("exit", r))
    await runtime.dispose()
    rmSync(dir, { recursive: true, force: true })
  }
}

const ALL_MODES = [
  "poll", "library", "dv-ded-5", "dv-ded-10", "dv-ded-20", "dv-main-5", "dv-main-10", "dv-main-20", "fswatch", "watchfile-10"
]

const main = async () => {
  const argv = process.argv.slice(2)
  if (argv[0] === "--child") return child(argv[1] ?? "", argv[2] ?? "")
  const flag = (name: string, dflt: string) => {
    const i = argv.indexOf(name)
    return i >= 0 ? argv[i + 1] ?? dflt : dflt
  }
  const modes = flag("--modes", ALL_MODES.join(",")).split(",")
  const items = Number(flag("--items", "100"))
  const idleS = Number(flag("--idle", "20"))
  const burst = Number(flag("--burst", "2000"))
  const repeat = Number(flag("--repeat", "1"))
  const selfN = Number(flag("--self", "20000"))
  const runs = new Map<string, Array<Result>>(modes.map((m) => [m, []]))
  for (let round = 0; round < repeat; round++) {
    for (const mode of modes) {
      const r = await measure(mode, items, idleS, burst, selfN)
      runs.get(mode)!.push(r)
      console.error(JSON.stringify({ round, ...r }))
    }
  }
  const median = (rs: ReadonlyArray<Result>, key: Exclude<keyof Result, "mode">) => percentile(rs.map((r) => r[key]), 50)
  console.log(`${items} items, idle ${idleS} s, burst ${burst}, medians of ${repeat}`)
  console.log(
    `| mode | pickup p50 ms | p99 ms | max ms | idle CPU % | idle claims (${idleS} s) | claims draining ${burst} | watcher wakes draining | drain ms | own drain of ${selfN}: jobs/s | CPU ms / 1,000 | claims |`
  )
  console.log("|---|---|---|---|---|---|---|---|---|---|---|---|")
  const f = (n: number, d = 1) => n.toFixed(d)
  for (const [mode, rs] of runs) {
    const m = (key: Exclude<keyof Result, "mode">) => median(rs, key)
    console.log(
      `| ${mode} | ${f(m("p50"))} | ${f(m("p99"))} | ${f(m("max"))} | ${f(m("idleCpuPct"), 2)} | ${m("idleClaims")} | ${
        m("drainClaims")
      } | ${m("drainWakes")} | ${f(m("drainMs"), 0)} | ${f(m("selfRate"), 0)} | ${f(m("selfCpuPer1000"))} | ${m("selfClaims")} |`
    )
  }
}

void main()
