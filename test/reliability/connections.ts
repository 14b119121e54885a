/**
 * Connections exhausted: a PostgreSQL cluster of the test's own with
 * `max_connections` 20. Two `docket worker` processes run items; then the
 * test's own clients take every connection left, until the server refuses
 * them ("too many clients"; they connect as the superuser, so the
 * superuser_reserved_connections go too), and keep taking any that frees up.
 * Meanwhile an application (a `Docket.layerClient` in this process, whose
 * connection was closed) enqueues, one at a time and in bursts; another, whose
 * one pooled connection is busy, waits for a pool slot; and `docket enqueue`
 * runs. The workers and applications connect as an ordinary role, so a
 * connection freed for a moment (before the test's clients take it) is not
 * theirs: PostgreSQL keeps the last 3 for superusers. In phase A the workers
 * keep the connections they hold; at the cut (4 s in) those are closed and
 * taken too, and in phase B the workers have none but their LISTEN
 * connections. Then the test lets every connection go.
 *
 * Checked: every enqueue during the outage fails with a typed `StorageError`
 * saying "too many clients", at once (a wait for a pool slot: with the pool's
 * "timeout exceeded", after its 10 s connection timeout); the command exits 1
 * naming the cause; no refused item was stored. In phase A the workers record
 * outcomes on the connections they hold; in phase B they are refused (typed,
 * logged) and stay up; once connections are free they claim again within a
 * claim retry (500 ms); what they held, what ran across the cut and every
 * accepted item are done. Connections counted in pg_stat_activity (by
 * application_name) before, during and after: no pool above its bound after
 * the outage, and the enqueuing application's pool holds no half-made client.
 */
import { SqlClient } from "@effect/sql"
import { execFile } from "node:child_process"
import { Effect, Either, ManagedRuntime, Option } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import * as Docket from "../../src/Docket.js"
import { StorageError } from "../../src/Errors.js"
import * as DirectPool from "../../src/internal/directPool.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { BIN, ROOT } from "../support/cli.js"
import { freshDir } from "../support/db.js"
import { readRuns } from "./controlRuns.js"
import {
  delay,
  fixture,
  IN_CI,
  killWorker,
  type PrivateCluster,
  privateCluster,
  report,
  startWorker,
  stopWorker,
  waitFor,
  type WorkerProcess,
  withDatabase
} from "./support.js"

const MAX_CONNECTIONS = 20
const WORKERS = 2
/** Database.ts's default pool size (Database.Options.maxConnections). */
const POOL_MAX = 10
const LEASE_MS = 3000
const HELD_MS = 3000

interface Attempt {
  readonly n: number
  readonly outcome: "accepted" | "refused"
  readonly ms: number
  readonly tag?: string
  readonly message?: string
}

type Runtime = ManagedRuntime.ManagedRuntime<QueueRepo.QueueRepo | SqlClient.SqlClient, unknown>

/** One enqueue through a runtime: its outcome, how long it took, the error's tag and message. */
const enqueueOnce = async (runtime: Runtime, n: number, ms = 20): Promise<Attempt> => {
  const started = performance.now()
  const result = await runtime.runPromise(
    Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue("rel.hold", { n, ms })).pipe(
      // A hang would show as this timeout (not a StorageError: the test fails).
      Effect.timeout("30 seconds"),
      Effect.either
    )
  )
  const took = Math.round(performance.now() - started)
  if (Either.isRight(result)) return { n, outcome: "accepted", ms: took }
  const error = result.left
  const tag = error instanceof StorageError ? error._tag : `untyped ${String((error as { _tag?: string })._tag)}`
  return { n, outcome: "refused", ms: took, tag, message: error.message }
}

/** The pg pool under a runtime's client (Database.ts builds it and provides it as DirectPool). */
const poolOf = async (runtime: Runtime) =>
  Option.getOrThrow(await runtime.runPromise(Effect.serviceOption(DirectPool.DirectPool))).pool as unknown as pg.Pool

/** Connections by application_name (every database of the cluster). */
const connections = async (admin: pg.Client): Promise<Record<string, number>> => {
  const { rows } = await admin.query<{ name: string; n: string }>(
    `SELECT coalesce(nullif(application_name, ''), '(none)') AS name, count(*) AS n
     FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY 1 ORDER BY 1`
  )
  return Object.fromEntries(rows.map((r) => [r.name, Number(r.n)]))
}
/** Connections left inside a transaction (a client checked out and never given back mid-transaction: a leak), by name. */
const inTransaction = async (admin: pg.Client): Promise<number> => {
  const { rows } = await admin.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity
     WHERE backend_type = 'client backend' AND application_name LIKE 'docket%' AND state LIKE 'idle in transaction%'`
  )
  return Number(rows[0].n)
}
const show = (counts: Record<string, number>) =>
  Object.entries(counts).map(([k, v]) => `${k.replace(/ /g, "_")}:${v}`).join(",")

/** `docket enqueue` as a process: its exit code, stderr and time. */
const commandEnqueue = (url: string) =>
  new Promise<{ code: number; stderr: string; ms: number }>((resolve) => {
    const started = performance.now()
    execFile(process.execPath, [BIN, "enqueue", "--database", url, "rel.hold", JSON.stringify({ n: -1, ms: 1 })], {
      cwd: ROOT,
      timeout: 60_000
    }, (error, _stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resolve({ code, stderr: stderr.trim(), ms: Math.round(performance.now() - started) })
    })
  })

export const connectionsScenario = () =>
  describe("connections exhausted (a private PostgreSQL cluster at max_connections)", () => {
    it("enqueues fail typed and at once; workers keep their items and claim again; no pool leaks", async (ctx) => {
      let cluster: PrivateCluster
      try {
        cluster = await privateCluster({ maxConnections: MAX_CONNECTIONS })
      } catch (error) {
        if (IN_CI) throw error
        const reason = `cannot make a private PostgreSQL cluster (${String(error)})`
        console.warn(`RELIABILITY: connections scenario skipped: ${reason}`)
        ctx.skip(reason)
        return
      }
      const logs = freshDir()
      // The workers and the applications connect as an ordinary role; the test's
      // own clients as the superuser (they may take superuser_reserved_connections too).
      const url = withDatabase(cluster.adminUrl.replace("//root@", "//docket_app@"), "docket_rel")
      // The test's own single connections (a pool's idle one would close in 10 s, during the outage).
      const client = (name: string, on = url) => {
        const c = new pg.Client({ connectionString: on, application_name: name, connectionTimeoutMillis: 5000 })
        c.on("error", () => {})
        return c
      }
      const admin = client("rel-admin", cluster.adminUrl)
      const db = client("rel-admin", withDatabase(cluster.adminUrl, "docket_rel"))
      const workers: Array<WorkerProcess> = []
      const fillers: Array<pg.Client> = []
      const runtimes: Array<Runtime> = []
      let keeping = false
      let releaseBusy = () => {}
      let keeper: Promise<void> = Promise.resolve()
      try {
        await admin.connect()
        await admin.query("CREATE ROLE docket_app LOGIN")
        await admin.query("CREATE DATABASE docket_rel OWNER docket_app")
        await db.connect()
        const layer = (applicationName: string, maxConnections: number) => {
          const runtime: Runtime = ManagedRuntime.make(Docket.layerClient(url, { databaseOptions: { applicationName, maxConnections } }))
          runtimes.push(runtime)
          return runtime
        }
        // The enqueuing application (pool of 2); built now, which migrates the database.
        const app = layer("rel-enqueuer", 2)
        await app.runPromise(QueueRepo.QueueRepo)
        // An application whose one pooled connection will be busy: its enqueue waits for the slot.
        const busy = layer("rel-busy", 1)
        await busy.runPromise(QueueRepo.QueueRepo)

        for (let i = 0; i < WORKERS; i++) {
          workers.push(startWorker({
            database: url,
            tasks: fixture("conns"),
            args: ["--lease", `${LEASE_MS}ms`, "--poll", "300ms", "--concurrency", "3"],
            env: { CONTROL_LOG_DIR: logs.dir },
            keep: /storage error in|lease lost|completion refused|works again/,
            count: /storage error in/
          }))
        }
        await Promise.all(workers.map((w) => w.ready(60_000)))
        const accepted: Array<number> = []
        const enqueueAll = async (from: number, count: number, ms: number, options?: QueueRepo.EnqueueOptions) => {
          for (let n = from; n < from + count; n++) {
            await app.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue("rel.hold", { n, ms }, options)))
            accepted.push(n)
          }
        }
        const runsOf = (from: number, to: number) => readRuns(logs.dir).filter((r) => r.n >= from && r.n < to)
        const doneCount = async () =>
          Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM docket_items_all WHERE state = 'done'")).rows[0].n)
        // Items held when the outage starts (3 s each), and short ones.
        await enqueueAll(1, 4, HELD_MS)
        await enqueueAll(100, 20, 50)
        await waitFor("the held items running, the short ones done", () =>
          runsOf(1, 5).length === 4 && runsOf(100, 120).filter((r) => r.end !== null).length === 20, 30_000)
        const before = await connections(admin)

        // Phase A, the workers keep their connections: items due 1 s in (4 s each:
        // still running at the cut, 4 s in). Phase B, the workers cut off: items due 7.5 s in
        // (the cut has 3.5 s to happen before they are due, on a loaded machine).
        const t0 = Date.now()
        await enqueueAll(200, 6, 4000, { delay: "1 second" })
        await enqueueAll(300, 10, 50, { delay: "7500 millis" })
        // The busy application's one connection is checked out (reserved, no statement
        // running: no statement timeout can end it) until its enqueue has given up.
        const busySql = await busy.runPromise(SqlClient.SqlClient)
        const busyPool = await poolOf(busy)
        const holding = new Promise<void>((resolve) => (releaseBusy = resolve))
        const busyHeld = busy.runPromise(Effect.scoped(Effect.zipRight(busySql.reserve, Effect.promise(() => holding))))
        await waitFor("the busy application's connection checked out", () =>
          busyPool.totalCount === 1 && busyPool.idleCount === 0, 10_000, 20)
        // The enqueuing application's connection goes (as an idle one does after 10 s).
        const appPool = await poolOf(app)
        await admin.query("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = 'rel-enqueuer'")
        await waitFor("the application's pool dropped its closed connection", () => appPool.totalCount === 0, 10_000, 20)

        // Take every connection left, until the server refuses.
        let refusal = ""
        const fill = async () => {
          for (;;) {
            const c = client("rel-filler", cluster.adminUrl)
            try {
              await c.connect()
              fillers.push(c)
            } catch (error) {
              refusal = (error as Error).message
              if ((error as { code?: string }).code !== "53300") throw error
              return
            }
          }
        }
        await fill()
        const outageStart = Date.now()
        const doneAtStart = await doneCount()
        // Any connection that frees up (a worker's idle one closing) is taken too. Until
        // then the ordinary role is refused anyway: with 3 or fewer connections free,
        // PostgreSQL keeps them for superusers.
        keeping = true
        keeper = (async () => {
          while (keeping) {
            await fill().catch(() => undefined)
            await delay(50)
          }
        })()

        const busyWait = enqueueOnce(busy, -2)
        const command = commandEnqueue(url)
        const attempts: Array<Attempt> = []
        const enqueuer = (async () => {
          let n = 1000
          while (attempts.length < 60) {
            attempts.push(await enqueueOnce(app, n++))
            // A burst of five at once, every tenth: more than the pool's two connections.
            if (attempts.length % 10 === 0) attempts.push(...await Promise.all(Array.from({ length: 5 }, () => enqueueOnce(app, n++))))
            await delay(30)
          }
        })()

        // The cut, 4 s in: the workers' pooled and claim connections are closed
        // one at a time, each taken by the test's clients before the next is closed
        // (never more than one free: none goes back to the ordinary role); their
        // LISTEN connections stay.
        await waitFor("phase A over", () => Date.now() - t0 >= 4000, 10_000, 20)
        const duringA = await connections(admin)
        const doneAtCut = await doneCount()
        const runningAtCut = runsOf(200, 206).length
        const { rows: held } = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
           WHERE usename = 'docket_app' AND application_name LIKE 'docket%' AND application_name <> 'docket listen'`
        )
        for (const { pid } of held) {
          await admin.query("SELECT pg_terminate_backend($1, 5000)", [pid])
          await fill()
        }
        const cutConnections = held.length
        const cutAt = Date.now()
        const errorsAtCut = workers.map((w) => w.counted())
        const keptAtCut = workers.map((w) => w.kept.length)
        const duringB = await connections(admin)

        await enqueuer
        const appPoolDuring = { total: appPool.totalCount, idle: appPool.idleCount, waiting: appPool.waitingCount }
        const [busyAttempt, commandResult] = await Promise.all([busyWait, command])
        releaseBusy()
        await busyHeld
        // The phase-B items due for a second and more, the workers still cut off.
        await waitFor("the phase-B items due", () => Date.now() - t0 >= 8500, 20_000, 20)
        const workerErrors = workers.map((w, i) => w.counted() - errorsAtCut[i])

        // Let the connections go.
        keeping = false
        await keeper
        const filled = fillers.length
        await Promise.all(fillers.splice(0).map((c) => c.end().catch(() => undefined)))
        const freed = Date.now()
        const keptAtFree = workers.map((w) => w.kept.length)
        // Each worker's claimer says when its claims work again: that is the
        // recovery, whether or not the other worker won the items due then.
        const recoveredMs = workers.map(() => -1)
        const recovery = Promise.all(workers.map((w, i) =>
          waitFor(`worker ${i} claims again`, () => {
            // Recovered: its last claim line since the cut says it works again, or
            // there is none (a claim whose held connection was ended is sent again
            // on a fresh one, so a worker's claims may never have failed).
            const claimLines = w.kept.slice(keptAtCut[i]).filter((l) => /claim (failed|works again)/.test(l))
            const last = claimLines[claimLines.length - 1]
            if (last !== undefined && !/claim works again/.test(last)) return false
            recoveredMs[i] = Date.now() - freed
            return true
          }, 15_000)
        ))
        recovery.catch(() => undefined) // awaited below; not an unhandled rejection meanwhile
        const firstAfter = performance.now()
        await enqueueAll(400, 1, 50)
        const enqueueBackMs = Math.round(performance.now() - firstAfter)
        await enqueueAll(401, 29, 50)
        accepted.push(...attempts.filter((a) => a.outcome === "accepted").map((a) => a.n))
        await waitFor("every accepted item done", async () => (await doneCount()) >= accepted.length, 60_000)
        const phaseB = runsOf(300, 310)
        const resumeMs = Math.min(...phaseB.map((r) => r.start)) - freed
        await recovery
        // Runs per worker after the outage (reported: who wins the due items is a race).
        const claimedAfter = workers.map((w) => readRuns(logs.dir).filter((r) => r.pid === w.pid && r.start >= freed).length)
        const after = await connections(admin)
        const appPoolAfter = { total: appPool.totalCount, idle: appPool.idleCount, waiting: appPool.waitingCount }
        const leftInTransaction = await inTransaction(admin)

        for (const w of workers) expect(w.alive(), `worker ${w.name} still running`).toBe(true)
        const exits = await Promise.all(workers.map((w) => stopWorker(w)))
        const { rows: items } = await db.query<{ n: number; state: string; attempts: number }>(
          "SELECT (payload::jsonb->>'n')::int AS n, state, attempts FROM docket_items_all"
        )
        const stored = new Map(items.map((i) => [i.n, i]))
        const refused = attempts.filter((a) => a.outcome === "refused")
        const refusedButStored = refused.filter((a) => stored.has(a.n)).map((a) => a.n)
        const lost = accepted.filter((n) => stored.get(n)?.state !== "done")
        const heldItems = [1, 2, 3, 4].map((i) => stored.get(i)!)
        const across = [200, 201, 202, 203, 204, 205].map((i) => stored.get(i)!)
        const messages = [...new Set(refused.map((a) => a.message))]
        const workerLines = workers.flatMap((w) => w.kept).filter((l) => !l.startsWith("docket worker ") && !/works again/.test(l))
        report("connections exhausted", {
          maxConnections: MAX_CONNECTIONS,
          fillers: filled,
          outageMs: freed - outageStart,
          enqueues: attempts.length,
          refused: refused.length,
          acceptedInOutage: attempts.length - refused.length,
          maxRefusalMs: Math.max(0, ...refused.map((a) => a.ms)),
          untyped: refused.filter((a) => a.tag !== "StorageError").length,
          refusedButStored: refusedButStored.length,
          slotWaitMs: busyAttempt.ms,
          commandExit: commandResult.code,
          commandMs: commandResult.ms,
          enqueueBackMs,
          doneInPhaseA: doneAtCut - doneAtStart,
          heldAttempts: heldItems.map((i) => i.attempts).join("/"),
          runningAtCut,
          cutConnections,
          phaseBMs: freed - cutAt,
          workerStorageErrorsInB: workerErrors.join("/"),
          // A lost lease is printed twice (the log line and the event line), a refused completion once.
          leaseLost: workerLines.filter((l) => /lease lost/.test(l)).length / 2,
          completionRefused: workerLines.filter((l) => /completion refused/.test(l)).length,
          acrossCutAttempts: across.map((i) => i.attempts).join("/"),
          resumeMs,
          claimedAfter: claimedAfter.join("/"),
          claimWorksAgainMs: recoveredMs.join("/"),
          before: show(before),
          duringA: show(duringA),
          duringB: show(duringB),
          after: show(after),
          appPoolDuring: appPoolDuring.total,
          appPoolAfter: appPoolAfter.total,
          appPoolCheckedOutAfter: appPoolAfter.total - appPoolAfter.idle,
          docketInTransactionAfter: leftInTransaction,
          lost: lost.length
        })
        console.log(`RELIABILITY: connections exhausted: the server's refusal: ${refusal}`)
        console.log(`RELIABILITY: connections exhausted: enqueue errors: ${JSON.stringify(messages)}`)
        console.log(`RELIABILITY: connections exhausted: slot wait: ${busyAttempt.message}`)
        console.log(`RELIABILITY: connections exhausted: command: ${commandResult.stderr}`)
        for (const line of new Set(workerLines.map((l) => l.replace(/^\S+ /, "").replace(/#\d+/g, "#N")))) {
          console.log(`RELIABILITY: connections exhausted: worker: ${line}`)
        }

        expect(refusal).toMatch(/too many clients/)
        // Enqueues refused, typed, at once (within the connection timeout in any case).
        expect(refused.length).toBeGreaterThanOrEqual(60)
        expect(refused.filter((a) => a.tag !== "StorageError")).toEqual([])
        for (const a of refused) expect(a.message).toMatch(/^storage error in enqueue: .*(too many clients|connection slots are reserved)/)
        expect(Math.max(...refused.map((a) => a.ms))).toBeLessThan(10_000)
        expect(refusedButStored).toEqual([])
        // A wait for a pool slot ends with the pool's connection timeout (10 s), typed.
        expect(busyAttempt).toMatchObject({ outcome: "refused", tag: "StorageError" })
        expect(busyAttempt.message).toMatch(/timeout exceeded when trying to connect/)
        expect(busyAttempt.ms).toBeLessThan(15_000)
        expect(commandResult.code).toBe(1)
        expect(commandResult.stderr).toMatch(/too many clients|connection slots are reserved/)
        // Phase A: the workers recorded outcomes on the connections they held.
        expect(doneAtCut).toBeGreaterThan(doneAtStart)
        // Phase B: cut off, refused (typed) and logged; claiming again within a claim retry of the end.
        expect(duringB["docket"] ?? 0).toBe(0)
        for (const e of workerErrors) expect(e).toBeGreaterThan(0)
        expect(phaseB).toHaveLength(10)
        for (const r of phaseB) expect(r.start).toBeGreaterThanOrEqual(freed)
        expect(resumeMs).toBeLessThan(3000)
        for (const ms of recoveredMs) expect(ms).toBeLessThan(3000)
        // What they held when the server filled up ran once: the full server took
        // no connection of theirs away, so no lease was lost and nothing ran again.
        expect(heldItems.map((i) => i.attempts)).toEqual([1, 1, 1, 1])
        // Nothing lost: what they held, what ran across the cut, everything accepted.
        expect([...heldItems, ...across].map((i) => i.state)).toEqual(Array(10).fill("done"))
        expect(lost).toEqual([])
        for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null })
        // No pool holds more than its bound; the application's holds no half-made client.
        // (An enqueue that got a connection freed during the outage may keep it: at most the pool's 2.)
        expect(appPoolDuring.total).toBeLessThanOrEqual(attempts.length === refused.length ? 0 : 2)
        expect(appPoolAfter.total).toBeLessThanOrEqual(2)
        expect(appPoolAfter.waiting).toBe(0)
        // A leak is a connection checked out and never given back: every one
        // the application's pool holds is idle once its enqueues settled
        // (refused ones included), and no Docket connection sits inside a
        // transaction nobody will finish.
        expect(appPoolDuring.total - appPoolDuring.idle).toBe(0)
        expect(appPoolAfter.total - appPoolAfter.idle).toBe(0)
        expect(leftInTransaction).toBe(0)
        expect(after["docket"] ?? 0).toBeLessThanOrEqual(WORKERS * POOL_MAX)
        expect(after["rel-enqueuer"] ?? 0).toBeLessThanOrEqual(2)
        expect(after["docket listen"]).toBe(WORKERS)
        expect(after["rel-filler"]).toBeUndefined()
      } finally {
        keeping = false
        releaseBusy()
        await keeper.catch(() => undefined)
        await Promise.all(workers.map((w) => killWorker(w)))
        await Promise.all(fillers.map((c) => c.end().catch(() => undefined)))
        for (const runtime of runtimes) await runtime.dispose().catch(() => undefined)
        await admin.end().catch(() => undefined)
        await db.end().catch(() => undefined)
        await cluster.destroy()
        logs.remove()
      }
    }, 120_000)
  })
