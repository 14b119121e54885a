/**
 * The `docket` command end to end, as a child process, on a real SQLite file
 * and on a fresh PostgreSQL database: migrate, enqueue (one and bulk), stats,
 * a worker over plain-JavaScript and TypeScript task files, dead list / retry
 * / delete, SIGTERM during work, and the live workers (`docket workers`, a
 * SIGKILLed worker shown as gone, the kinds `docket stats` says no live worker
 * handles).
 */
import { SqlClient } from "@effect/sql"
import { Effect, ManagedRuntime } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { QueueRepo as QueueRepoTag } from "../../src/QueueRepo.js"
import { cliBackends, DOCKET_URL, docket, docketAll, EFFECT_URL, lines, noHorizon, start, tempDir, waitUntil } from "../support/cli.js"
import { repoLayer } from "../support/db.js"

interface Db {
  readonly url: string
  /** Runs a QueueRepo operation in this process, on the same database. */
  readonly repo: <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) => Promise<A>
  /** Runs a statement in this process, on the same database (tests move time by editing rows). */
  readonly sql: (text: string) => Promise<ReadonlyArray<Record<string, unknown>>>
}

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const backends = cliBackends(cleanups)

const openDb = (url: string): Db => {
  const runtime = ManagedRuntime.make(repoLayer(url))
  cleanups.push(() => runtime.dispose())
  return {
    url,
    repo: (f) => runtime.runPromise(Effect.flatMap(QueueRepoTag, f)),
    sql: (text) => runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text)))
  }
}

/** A TypeScript task file with a typed handler: its payload a Schema.Struct of `fields`, `run` an Effect of `payload`. */
const typedTaskFile = (kind: string, fields: string, run: string) =>
  `import { Handler } from ${JSON.stringify(DOCKET_URL)}
  import { Effect, Schema } from ${JSON.stringify(EFFECT_URL)}
  const Payload = Schema.Struct(${fields})
  export default Handler.make(${JSON.stringify(kind)}, {
    payload: Payload,
    run: (payload: typeof Payload.Type) => ${run}
  })\n`

/** A folder of task files: plain JavaScript (.js in a "type": "module" package, .mjs) and TypeScript (.ts, .mts). */
const taskFolder = () => {
  const d = tempDir("docket-tasks-")
  cleanups.push(async () => d.remove())
  d.write("package.json", JSON.stringify({ type: "module" }))
  // Plain JavaScript: a throw is a retry.
  d.write(
    "js.plain.js",
    `export default async (payload, job) => {
      if (typeof payload.n !== "number") throw new Error("n is missing")
    }\n`
  )
  d.write(
    "flaky.mjs",
    `export const options = { backoff: "50ms" }
    export default async (payload, job) => {
      if (job.attempt < 2) throw new Error("the first attempt fails")
    }\n`
  )
  // TypeScript: a typed handler (its payload decoded with a Schema).
  d.write("ts.typed.ts", typedTaskFile("ts.typed", "{ to: Schema.String }", "Effect.sleep(payload.to.length)"))
  d.write(
    "perm.mts",
    `import { Handler, Permanent } from ${JSON.stringify(DOCKET_URL)}
    export default Handler.fromPromise("perm", async (): Promise<void> => {
      throw new Permanent({ reason: "never works" })
    })\n`
  )
  // Helpers (a leading underscore) are not task files.
  d.write("_shared.mjs", `export const shared = 1\n`)
  return d.dir
}

const json = <A = any>(text: string): A => JSON.parse(text) as A

const VERSION = String(json(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version)

describe.each(backends)("docket command on $name", (backend) => {
  describe.skipIf(backend.skip).concurrent("", () => {
    // A dozen command starts, some at once: on a loaded two-core machine up to a minute.
    it("migrates, enqueues (dedupe, delay, run-at, priority, attempts) and counts", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      const first = await docket(["migrate", "--database", url])
      expect(first.code, first.stderr).toBe(0)
      expect(first.stdout).toMatch(/applied migration/)
      const again = await docket(["migrate"], { env: { DOCKET_DATABASE_URL: url } })
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout).toMatch(/up to date/)

      const added = await docket(
        ["enqueue", "mail.send", `{"to":"a@example.com"}`, "--key", "msg-1", "--priority", "5", "--max-attempts", "3"],
        { env: { DOCKET_DATABASE_URL: url } }
      )
      expect(added.code, added.stderr).toBe(0)
      const id = Number(added.stdout.trim())
      expect(Number.isSafeInteger(id)).toBe(true)

      const [twin, later, at, negative] = await docketAll([
        ["enqueue", "mail.send", `{"to":"b@example.com"}`, "--key", "msg-1", "--database", url],
        ["enqueue", "report.build", "--delay", "5m", "--database", url],
        ["enqueue", "report.build", `{"month":"2030-01"}`, "--run-at", "2999-01-01T00:00:00Z", "--database", url],
        ["enqueue", "cleanup", "-1", "--priority=-7", "--database", url]
      ])
      expect(twin.code, twin.stderr).toBe(0)
      expect(twin.stdout.trim()).toBe(`deduplicated: item ${id} of kind mail.send with key msg-1 is already waiting`)
      for (const r of [later, at, negative]) expect(r.code, r.stderr).toBe(0)

      const stats = await docket(["stats", "--json", "--database", url])
      expect(stats.code, stats.stderr).toBe(0)
      expect(json(stats.stdout)).toEqual({
        due: 2,
        scheduled: 2,
        running: 0,
        done: 0,
        dead: 0,
        cancelled: 0,
        byKind: {
          "cleanup": { due: 1, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 0 },
          "mail.send": { due: 1, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 0 },
          "report.build": { due: 0, scheduled: 2, running: 0, done: 0, dead: 0, cancelled: 0 }
        },
        // No worker runs: every waiting kind.
        unhandledKinds: ["cleanup", "mail.send", "report.build"],
        horizon: noHorizon(backend.name)
      })
      const db = openDb(url)
      const item = await db.repo((repo) => repo.get(id))
      expect(item._tag === "Some" && item.value).toMatchObject({
        kind: "mail.send",
        payload: { to: "a@example.com" },
        key: "msg-1",
        priority: 5,
        maxAttempts: 3,
        state: "waiting"
      })
      const cleanup = await db.repo((repo) => repo.get(Number(negative.stdout.trim())))
      expect(cleanup._tag === "Some" && cleanup.value).toMatchObject({ payload: -1, priority: -7 })
      const scheduled = await db.repo((repo) => repo.get(Number(later.stdout.trim())))
      expect(scheduled._tag === "Some" && scheduled.value.runAt - scheduled.value.createdAt).toBeGreaterThanOrEqual(
        299_000
      )

      if (backend.name === "sqlite") {
        // The text form (the same on every database).
        const text = await docket(["stats", "--database", url])
        expect(text.code).toBe(0)
        expect(lines(text.stdout)[0]).toMatch(/^kind\s+due\s+scheduled\s+running\s+done\s+dead\s+cancelled$/)
        expect(text.stdout).toMatch(/^total\s+2\s+2\s+0\s+0\s+0\s+0$/m)
      }
    })

    it("enqueues in bulk from a file and from stdin; a bad line refuses the whole file", async () => {
      const url = await backend.fresh()
      const d = tempDir()
      cleanups.push(async () => d.remove())
      const good = d.write(
        "items.ndjson",
        [
          `{"kind":"mail.send","payload":{"to":"a@example.com"},"key":"k1"}`,
          `{"kind":"mail.send","payload":{"to":"b@example.com"},"key":"k1"}`,
          ``,
          `{"kind":"report.build","payload":{"month":"2030-01"},"delay":"1h","priority":2,"maxAttempts":4}`,
          `{"kind":"report.build","payload":{"month":"2030-02"},"runAt":"2999-01-01T00:00:00Z"}`,
          `{"kind":"cleanup","payload":null,"delay":0}`
        ].join("\n") + "\n"
      )
      const bad = d.write(
        "bad.ndjson",
        [
          `{"kind":"mail.send","payload":{"to":"c@example.com"}}`,
          `{"kind":"mail.send","payload":{"to":"d@example.com"}}`,
          `{"kind":"mail.send","payload":{"to":"e@example.com"},"delay":"-5s"}`
        ].join("\n") + "\n"
      )
      const fromFile = await docket(["enqueue", "--from", good, "--database", url])
      expect(fromFile.code, fromFile.stderr).toBe(0)
      expect(fromFile.stdout.trim()).toBe("enqueued 4 items (1 deduplicated)")
      const [fromStdin, refused, refusedStdin] = await Promise.all([
        docket(["enqueue", "--from", "-", "--database", url], {
          stdin: `{"kind":"cleanup","payload":1}\n{"kind":"cleanup","payload":2}\n`
        }),
        docket(["enqueue", "--from", bad, "--database", url]),
        docket(["enqueue", "--from", "-", "--database", url], {
          stdin: `{"kind":"cleanup","payload":3}\n{"kind":"cleanup","paylod":4}\n`
        })
      ])
      expect(fromStdin.code, fromStdin.stderr).toBe(0)
      expect(fromStdin.stdout.trim()).toBe("enqueued 2 items")
      expect(refused.code).toBe(2)
      expect(lines(refused.stderr)).toEqual([`docket: line 3: delay must not be negative (got "-5s")`])
      expect(refusedStdin.code).toBe(2)
      expect(lines(refusedStdin.stderr)).toEqual([`docket: line 2: unknown field "paylod"`])

      const stats = await openDb(url).repo((repo) => repo.stats)
      expect(stats).toMatchObject({ due: 4, scheduled: 2, running: 0, dead: 0 })
      expect(stats.byKind["mail.send"].due).toBe(1)
      expect(stats.byKind["cleanup"].due).toBe(3)
    })

    it("runs plain-JavaScript and TypeScript task files; dead list, retry and delete", async () => {
      const url = await backend.fresh()
      const db = openDb(url)
      // --all-kinds: an item of a kind with no task file ("nobody") is dead at once.
      const worker = start(["worker", "--tasks", taskFolder(), "--database", url, "--poll", "200ms", "--grace", "2s", "--all-kinds", "--log-items"])
      cleanups.push(async () => {
        worker.child.kill("SIGKILL")
      })
      await worker.waitFor(/docket worker \S+ started on .*: 4 kinds \(flaky, js\.plain, perm, ts\.typed\)/)
      const enqueued = await db.repo((repo) =>
        repo.enqueueMany([
          { kind: "js.plain", payload: { n: 1 } },
          { kind: "js.plain", payload: { n: 2 } },
          { kind: "js.plain", payload: { n: 3 } },
          { kind: "flaky", payload: {} },
          { kind: "flaky", payload: {} },
          { kind: "ts.typed", payload: { to: "a@example.com" } },
          { kind: "ts.typed", payload: { to: "b@example.com" } },
          { kind: "ts.typed", payload: { to: 42 } },
          { kind: "perm", payload: { x: 1 } },
          { kind: "nobody", payload: "?" }
        ])
      )
      const ids = enqueued.map((r) => r.id)
      await waitUntil("every item done or dead", async () => {
        const s = await db.repo((repo) => repo.stats)
        return s.due + s.scheduled + s.running === 0 && s.dead === 3
      })
      // One log line per event (printed a moment after the outcome is recorded).
      for (
        const line of [
          `done js\\.plain #${ids[0]} in \\d+ ms`,
          `retry flaky #${ids[3]} \\(attempt 1 of 8\\) in 50 ms: Error: the first attempt fails`,
          `done flaky #${ids[3]} `,
          `done ts\\.typed #${ids[5]} `,
          `dead ts\\.typed #${ids[7]} \\(attempt 1\\): DecodeError`,
          `dead perm #${ids[8]} \\(attempt 1\\): Permanent: never works`,
          `dead nobody #${ids[9]} \\(attempt 1\\): UnknownKind`
        ]
      ) await worker.waitFor(new RegExp(line), 5000)
      worker.child.kill("SIGTERM")
      const exit = await worker.exited
      expect(exit.code, exit.stderr).toBe(0)
      expect(exit.stdout).toMatch(/docket worker stopped: done 7, retried 2, dead 3, given back 0/)

      const [list, text, onlyPerm] = await docketAll([
        ["dead", "list", "--json", "--database", url],
        ["dead", "list", "--database", url],
        ["dead", "list", "--kind", "perm", "--json", "--database", url]
      ])
      expect(list.code, list.stderr).toBe(0)
      const dead = json<Array<QueueRepo.Item>>(list.stdout)
      expect(dead.map((i) => [i.id, i.kind, i.attempts, i.payload])).toEqual([
        [ids[7], "ts.typed", 1, { to: 42 }],
        [ids[8], "perm", 1, { x: 1 }],
        [ids[9], "nobody", 1, "?"]
      ])
      expect(dead[0].lastError).toMatch(/^DecodeError: /)
      expect(dead[1].lastError).toBe("Permanent: never works")
      expect(dead[2].lastError).toMatch(/^UnknownKind: /)
      expect(lines(text.stdout)[0]).toBe("ID\tKIND\tATTEMPTS\tLAST ERROR\tPAYLOAD")
      // Enqueued without a budget: the attempts alone (its handler's budget applied).
      expect(lines(text.stdout)[2]).toBe(`${ids[8]}\tperm\t1\tPermanent: never works\t{"x":1}`)
      expect(json<Array<QueueRepo.Item>>(onlyPerm.stdout).map((i) => i.id)).toEqual([ids[8]])

      const retried = await docket(["dead", "retry", String(ids[8]), "--database", url])
      expect(retried.code, retried.stderr).toBe(0)
      expect(retried.stdout.trim()).toBe(`retried 1 dead item: ${ids[8]}`)
      const [missing, deletedKind] = await docketAll([
        ["dead", "retry", "999999", "--database", url],
        ["dead", "delete", "--all", "--kind", "nobody", "--database", url]
      ])
      expect(missing.code).toBe(1)
      expect(lines(missing.stderr)).toEqual(["docket: not dead (or no such item): 999999"])
      expect(deletedKind.code, deletedKind.stderr).toBe(0)
      expect(deletedKind.stdout.trim()).toBe(`deleted 1 dead item: ${ids[9]}`)
      const deleted = await docket(["dead", "delete", String(ids[7]), "--database", url])
      expect(deleted.stdout.trim()).toBe(`deleted 1 dead item: ${ids[7]}`)

      const stats = await docket(["stats", "--json", "--database", url])
      // The items that ran are kept as done (default retention); the retried dead one waits.
      const zero = { due: 0, scheduled: 0, running: 0, dead: 0, cancelled: 0 }
      expect(json(stats.stdout)).toEqual({
        due: 1,
        scheduled: 0,
        running: 0,
        done: 7,
        dead: 0,
        cancelled: 0,
        byKind: {
          "flaky": { ...zero, done: 2 },
          "js.plain": { ...zero, done: 3 },
          "perm": { ...zero, due: 1, done: 0 },
          "ts.typed": { ...zero, done: 2 }
        },
        unhandledKinds: ["perm"],
        horizon: noHorizon(backend.name)
      })
      const again = await db.repo((repo) => repo.get(ids[8]))
      expect(again._tag === "Some" && again.value).toMatchObject({ state: "waiting", attempts: 0 })
    })

    it("without --all-kinds a worker claims only its task files' kinds: another kind's item waits", async () => {
      const url = await backend.fresh()
      const db = openDb(url)
      const tasks = tempDir("docket-tasks-")
      cleanups.push(async () => tasks.remove())
      tasks.write("mine.mjs", "export default async () => {}\n")
      // Enqueued first: a worker claiming every kind would take it in the same claim as the first "mine".
      const [theirs, first] = await db.repo((repo) =>
        repo.enqueueMany([{ kind: "theirs", payload: 1 }, { kind: "mine", payload: 1 }])
      )
      const worker = start(["worker", "--tasks", tasks.dir, "--database", url, "--poll", "100ms", "--log-items"])
      cleanups.push(async () => {
        worker.child.kill("SIGKILL")
      })
      await worker.waitFor(new RegExp(`done mine #${first.id} `))
      // A later claim (after another poll and wake-up) leaves it too.
      const [second] = await db.repo((repo) => repo.enqueueMany([{ kind: "mine", payload: 2 }]))
      await worker.waitFor(new RegExp(`done mine #${second.id} `))
      worker.child.kill("SIGTERM")
      const exit = await worker.exited
      expect(exit.code, exit.stderr).toBe(0)
      expect(exit.stdout).toMatch(/docket worker stopped: done 2, retried 0, dead 0, given back 0/)
      expect(exit.stdout).not.toContain("theirs")
      const item = await db.repo((repo) => repo.get(theirs.id))
      expect(item._tag === "Some" && item.value).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null })
      // Stopped gracefully: its row in the live-workers table is gone.
      expect(await db.repo((repo) => repo.listWorkers())).toEqual([])
    })

    it("a transactional task file writes through tx.query in the transaction that completes its item: a failed attempt leaves nothing", async () => {
      const url = await backend.fresh()
      const db = openDb(url)
      await db.sql("CREATE TABLE task_rows (item BIGINT NOT NULL, attempt INTEGER NOT NULL)")
      const tasks = tempDir("docket-tasks-")
      cleanups.push(async () => tasks.remove())
      const insert = backend.name === "pg" ? "INSERT INTO task_rows (item, attempt) VALUES ($1, $2)" : "INSERT INTO task_rows (item, attempt) VALUES (?, ?)"
      tasks.write("apply.mjs", `export const options = { transactional: true, backoff: "10ms" }
export default async (payload, job, tx) => {
  await tx.query(${JSON.stringify(insert)}, [job.id, job.attempt])
  if (job.attempt === 1) throw new Error("the first attempt fails after its write")
}
`)
      tasks.write("plain.mjs", "export default async (payload, job, tx) => { await tx.query('SELECT 1') }\n")
      const worker = start(["worker", "--tasks", tasks.dir, "--database", url, "--poll", "100ms", "--log-items"])
      cleanups.push(async () => {
        worker.child.kill("SIGKILL")
      })
      const [applied, plain] = await db.repo((repo) =>
        repo.enqueueMany([{ kind: "apply", payload: 1 }, { kind: "plain", payload: 1, maxAttempts: 1 }])
      )
      await worker.waitFor(new RegExp(`done apply #${applied.id} `))
      await worker.waitFor(new RegExp(`dead plain #${plain.id} \\(attempt 1\\): Error: docket: tx\\.query needs the handler's transactional: true`))
      worker.child.kill("SIGTERM")
      expect((await worker.exited).code).toBe(0)
      // Only the attempt that succeeded left its row.
      expect((await db.sql("SELECT item, attempt FROM task_rows")).map((r) => [Number(r.item), Number(r.attempt)])).toEqual([[applied.id, 2]])
    })

    it("docket workers: a running worker is live; SIGKILLed and silent, it is gone, and stats names the kinds no live worker handles", async () => {
      const url = await backend.fresh()
      const db = openDb(url)
      const tasks = tempDir("docket-tasks-")
      cleanups.push(async () => tasks.remove())
      tasks.write("mine.mjs", "export default async () => {}\n")
      await db.repo((repo) => repo.enqueue("theirs", 1))
      const worker = start(["worker", "--tasks", tasks.dir, "--database", url])
      cleanups.push(async () => {
        worker.child.kill("SIGKILL")
      })
      const startLine = /docket worker (\S+) started/
      await worker.waitFor(startLine)
      const name = startLine.exec(worker.stdout)![1]
      const list = (...extra: Array<string>) => ["workers", ...extra, "--database", url]
      const [listed, table, stats, statsText] = await docketAll([
        list("--json"),
        list(),
        ["stats", "--json", "--database", url],
        ["stats", "--database", url]
      ])
      for (const r of [listed, table, stats, statsText]) expect(r.code, r.stderr).toBe(0)
      const [info, ...others] = json<Array<QueueRepo.WorkerInfo>>(listed.stdout)
      expect(others).toEqual([])
      expect(info).toMatchObject({
        name,
        host: hostname(),
        pid: worker.child.pid,
        kinds: ["mine"],
        concurrency: 10,
        running: 0,
        version: VERSION,
        status: "live"
      })
      expect(info.id.startsWith(`${name}#`)).toBe(true)
      const rows = lines(table.stdout)
      expect(rows[0]).toMatch(/^id\s+name\s+host\s+pid\s+kinds\s+concurrency\s+running\s+version\s+started\s+heartbeat\s+status$/)
      expect(rows[1].split(/\s+/)).toEqual([
        info.id, name, hostname(), String(info.pid), "mine", "10", "0", VERSION,
        new Date(info.startedAt).toISOString().replace(/\.\d+Z$/, "Z"), expect.stringMatching(/^[\d.]+m?s$/), "ago", "live"
      ])
      expect(rows[2]).toBe("1 live, 0 gone")
      expect(json(stats.stdout).unhandledKinds).toEqual(["theirs"])
      expect(statsText.stdout).toMatch(/^no live worker handles: theirs \(1 waiting\)$/m)

      worker.child.kill("SIGKILL")
      expect((await worker.exited).signal).toBe("SIGKILL")
      // Killed: nothing removed its row. Its last heartbeat made 20 s old
      // (three heartbeats missed), instead of waiting for that.
      await db.sql("UPDATE docket_workers SET heartbeat_at = heartbeat_at - 20000")
      await db.repo((repo) => repo.enqueue("mine", 2))
      const [gone, goneTable, goneStats] = await docketAll([list("--json"), list(), ["stats", "--database", url]])
      expect(json<Array<QueueRepo.WorkerInfo>>(gone.stdout)).toMatchObject([{ id: info.id, status: "gone" }])
      expect(json<Array<QueueRepo.WorkerInfo>>(gone.stdout)[0].heartbeatAgeMs).toBeGreaterThanOrEqual(20_000)
      expect(lines(goneTable.stdout)[1]).toMatch(/ \d+[sm] ago +gone$/)
      expect(lines(goneTable.stdout)[2]).toBe("0 live, 1 gone")
      expect(goneStats.stdout).toMatch(/^no live worker handles: mine \(1 waiting\), theirs \(1 waiting\)$/m)
    })

    it("SIGTERM during work: running items get the grace, the rest are given back, the worker exits in time", async () => {
      const url = await backend.fresh()
      const db = openDb(url)
      const tasks = tempDir("docket-tasks-")
      cleanups.push(async () => tasks.remove())
      // Each run notes its start in a file: "claimed" (running in the database)
      // is not yet "started" (a prefetched item may still wait in the buffer).
      // The quick item takes 1.5 s: with 0.7 s, a loaded machine (a CI
      // rehearsal on Node 24) let it finish between the second start and the
      // signal, and the stop saw one running item, not two.
      const started = tasks.path("started.log")
      tasks.write(
        "slow.mjs",
        `import { appendFileSync } from "node:fs"\n` +
          `export default (payload) => { appendFileSync(${JSON.stringify(started)}, payload.ms + "\\n"); ` +
          `return new Promise((resolve) => setTimeout(resolve, payload.ms)) }\n`
      )
      const [quick, stuck] = await db.repo((repo) =>
        repo.enqueueMany([{ kind: "slow", payload: { ms: 1_500 } }, { kind: "slow", payload: { ms: 600_000 } }])
      )
      const worker = start(["worker", "--tasks", tasks.dir, "--database", url, "--grace", "3s", "--lease", "30s"])
      cleanups.push(async () => {
        worker.child.kill("SIGKILL")
      })
      await waitUntil("both items started", async () => existsSync(started) && readFileSync(started, "utf8").trim().split("\n").length === 2)
      const signalled = performance.now()
      worker.child.kill("SIGTERM")
      const exit = await worker.exited
      const tookMs = performance.now() - signalled
      expect(exit.code, exit.stderr).toBe(0)
      expect(tookMs).toBeGreaterThanOrEqual(2900)
      expect(tookMs).toBeLessThan(3000 + 3500)
      expect(exit.stdout).toMatch(/docket worker stopping: 2 running items may finish within 3000 ms/)
      expect(exit.stdout).toMatch(/docket worker stopped: done 1, retried 0, dead 0, given back 1/)
      // The lease was released: waiting again, due now, this attempt not counted.
      const stats = await db.repo((repo) => repo.stats)
      expect(stats).toMatchObject({ due: 1, scheduled: 0, running: 0, dead: 0 })
      const item = await db.repo((repo) => repo.get(stuck.id))
      expect(item._tag === "Some" && item.value).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null })
      expect(await db.repo((repo) => repo.get(quick.id))).toMatchObject({ value: { state: "done" } })
    })
  })
})

describe("task files whatever the package type (SQLite)", () => {
  it("loads ES module and CommonJS task files, .ts and .js, in a \"type\": \"commonjs\" package and with no package.json", async () => {
    // No package.json above the temporary folders: their files are CommonJS to Node unless .mjs/.mts.
    expect(existsSync(join(tmpdir(), "package.json")) || existsSync("/package.json")).toBe(false)
    const commonjs = tempDir("docket-tasks-cjs-")
    const none = tempDir("docket-tasks-none-")
    cleanups.push(async () => commonjs.remove(), async () => none.remove())
    commonjs.write("package.json", JSON.stringify({ type: "commonjs" }))
    // TypeScript with import/export, importing Docket, logging at info.
    commonjs.write("ts.esm.ts", typedTaskFile("ts.esm", "{ n: Schema.Number }", "Effect.logInfo(`ts.esm got ${payload.n}`)"))
    // CommonJS in a .js file, its options beside it: the first attempt fails, retried in 50 ms.
    commonjs.write(
      "js.cjs.js",
      `module.exports = async (payload, job) => { if (job.attempt < 2) throw new Error("once") }
      module.exports.options = { backoff: "50ms" }\n`
    )
    commonjs.write("plain.cjs", `module.exports = async (payload) => { if (payload !== 3) throw new Error("bad") }\n`)
    commonjs.write("typed.cts", `export default async (payload: number): Promise<void> => { if (payload !== 4) throw new Error("bad") }\n`)
    none.write("none.ts", `export const options = { backoff: 50 }\nexport default async (payload: { readonly ok: boolean }, job: { attempt: number }) => {\n  if (!payload.ok && job.attempt < 2) throw new Error("once")\n}\n`)
    none.write("none.esm.js", `export default async () => {}\n`)
    none.write("none.plain.cjs", `module.exports = async (payload) => { if (payload !== 8) throw new Error("bad") }\n`)

    const d = tempDir()
    cleanups.push(async () => d.remove())
    const url = d.path("queue.db")
    const db = openDb(url)
    const ids = (await db.repo((repo) =>
      repo.enqueueMany([
        { kind: "ts.esm", payload: { n: 1 } },
        { kind: "js.cjs", payload: 2 },
        { kind: "plain", payload: 3 },
        { kind: "typed", payload: 4 },
        { kind: "none", payload: { ok: false } },
        { kind: "none.esm", payload: 6 },
        { kind: "none", payload: { ok: true } },
        { kind: "none.plain", payload: 8 }
      ])
    )).map((r) => r.id)
    // Two workers on one queue, each with its own kinds; --log-level after the command.
    const a = start(["worker", "--tasks", commonjs.dir, "--database", url, "--poll", "200ms", "--log-level", "info", "--log-items"])
    const b = start(["worker", "--tasks", none.dir, "--database", url, "--poll", "200ms", "--log-items"])
    cleanups.push(async () => {
      a.child.kill("SIGKILL")
      b.child.kill("SIGKILL")
    })
    await a.waitFor(/docket worker \S+ started on .*: 4 kinds \(js\.cjs, plain, ts\.esm, typed\)/)
    await b.waitFor(/docket worker \S+ started on .*: 3 kinds \(none, none\.esm, none\.plain\)/)
    await waitUntil("every item done", async () => {
      const s = await db.repo((repo) => repo.stats)
      return s.due + s.scheduled + s.running + s.dead === 0
    })
    for (const line of [`done ts\\.esm #${ids[0]} `, `retry js\\.cjs #${ids[1]} \\(attempt 1 of 8\\) in 50 ms: Error: once`, `done js\\.cjs #${ids[1]} `, `done plain #${ids[2]} `, `done typed #${ids[3]} `]) {
      await a.waitFor(new RegExp(line), 5000)
    }
    for (const line of [`retry none #${ids[4]} \\(attempt 1 of 8\\) in 50 ms`, `done none #${ids[4]} `, `done none\\.esm #${ids[5]} `, `done none #${ids[6]} `, `done none\\.plain #${ids[7]} `]) {
      await b.waitFor(new RegExp(line), 5000)
    }
    a.child.kill("SIGTERM")
    b.child.kill("SIGTERM")
    const [exitA, exitB] = await Promise.all([a.exited, b.exited])
    expect(exitA.code, exitA.stderr).toBe(0)
    expect(exitB.code, exitB.stderr).toBe(0)
    expect(exitA.stderr).toMatch(new RegExp(`^info: ts\\.esm got 1 \\(id=${ids[0]} `, "m"))
    expect(exitB.stderr).toBe("")
  })
})
