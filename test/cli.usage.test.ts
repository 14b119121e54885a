/**
 * The `docket` command's usage: every kind of bad input exits 2 with one line
 * saying what is wrong and writes nothing; --help on the commands; and the
 * demo that `npm start` runs.
 */
import { existsSync, rmSync } from "node:fs"
import { dirname } from "node:path"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { docket, docketAll, lines, tempDir } from "./cli.support.js"
import { freshPgDatabase, pgAvailable } from "./support/db.js"

const scratch = tempDir()
afterAll(() => scratch.remove())

const tasks = tempDir("docket-tasks-")
tasks.write("ok.mjs", "export default async () => {}\n")
const notAHandler = tempDir("docket-tasks-")
notAHandler.write("broken.mjs", "export default 42\n")
const wrongKind = tempDir("docket-tasks-")
wrongKind.write(
  "mail.send.mjs",
  `export default { kind: "email.send", payload: {}, run: () => undefined }\n`
)
afterAll(() => [tasks, notAHandler, wrongKind].forEach((d) => d.remove()))

describe("bad usage and bad input: exit 2, one line, nothing written", () => {
  const db = scratch.path("never-created.db")
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, RegExp]> = [
    ["bad JSON", ["enqueue", "mail.send", "{to:"], /^docket: the payload is not valid JSON \(/],
    ["an unknown flag", ["enqueue", "mail.send", "{}", "--bogus"], /^docket: Received unknown argument: '--bogus'$/],
    ["an unknown flag in place of the payload", ["enqueue", "mail.send", "--bogus"], /^docket: unknown option --bogus$/],
    ["a negative delay", ["enqueue", "mail.send", "{}", "--delay", "-5s"], /^docket: --delay must not be negative \(got "-5s"\)$/],
    ["a bad duration", ["enqueue", "mail.send", "{}", "--delay", "5 parsecs"], /^docket: --delay: "5 parsecs" is not a duration/],
    ["a bad time", ["enqueue", "mail.send", "{}", "--run-at", "tomorrow"], /^docket: --run-at: "tomorrow" is not an ISO 8601 time/],
    ["a delay and a time", ["enqueue", "a", "1", "--delay", "1m", "--run-at", "2030-01-01T00:00:00Z"], /not both$/],
    ["a bad kind", ["enqueue", "mail send", "{}"], /^docket: invalid kind: /],
    ["a bad priority", ["enqueue", "a", "{}", "--priority", "high"], /^docket: 'high' is not a integer$/],
    ["no kind", ["enqueue"], /^docket: give the kind of the item/],
    ["a missing bulk file", ["enqueue", "--from", scratch.path("nope.ndjson")], /^docket: --from: file .* does not exist$/],
    ["an unknown command", ["frobnicate"], /^docket: Invalid subcommand for docket/],
    ["a worker without --tasks", ["worker"], /^docket: Expected to find option: '--tasks'$/],
    ["a missing task folder", ["worker", "--tasks", scratch.path("nope")], /^docket: --tasks: folder .* does not exist$/],
    ["a bad grace", ["worker", "--tasks", tasks.dir, "--grace", "soon"], /^docket: --grace: "soon" is not a duration/],
    ["a task file that is no handler", ["worker", "--tasks", notAHandler.dir], /^docket: task file broken\.mjs must default-export/],
    ["a handler of another kind", ["worker", "--tasks", wrongKind.dir], /exports the handler of kind email\.send; the file name says mail\.send/],
    ["dead retry without ids", ["dead", "retry"], /^docket: give the ids of dead items, or --all$/],
    ["ids and --all", ["dead", "delete", "3", "--all"], /^docket: give ids or --all, not both$/],
    ["stats of a queue that does not exist", ["stats"], /^docket: no queue at .*never-created\.db \(docket migrate, enqueue or worker makes one\)$/]
  ]

  it("refuses each, saying what is wrong on one line", async () => {
    const results = await docketAll(cases.map(([, args]) => [...args, "--database", db]), {}, 3)
    results.forEach((result, i) => {
      const [what, , message] = cases[i]
      expect({ what, code: result.code }).toEqual({ what, code: 2 })
      expect(result.stdout, what).toBe("")
      expect(lines(result.stderr), what).toHaveLength(1)
      expect(lines(result.stderr)[0], what).toMatch(message)
    })
    expect(existsSync(db)).toBe(false)
  })

  it("a SQLite file in a missing directory is bad input; an unreachable server a failure", async () => {
    const [missingDir, viaEnv, unreachable] = await docketAll([
      ["enqueue", "mail.send", "{}", "--database", scratch.path("no-such-dir", "queue.db")],
      ["stats"],
      ["stats", "--database", "postgres://root@127.0.0.1:1/docket"]
    ], { env: { DOCKET_DATABASE_URL: scratch.path("no-such-dir", "queue.db") } })
    expect(missingDir.code).toBe(2)
    expect(lines(missingDir.stderr)).toEqual([
      `docket: cannot open ${scratch.path("no-such-dir", "queue.db")}: directory ${scratch.path("no-such-dir")} does not exist`
    ])
    expect(viaEnv.code).toBe(2)
    expect(lines(viaEnv.stderr)[0]).toMatch(/directory .*no-such-dir does not exist$/)
    expect(existsSync(scratch.path("no-such-dir"))).toBe(false)
    expect(unreachable.code).toBe(1)
    expect(lines(unreachable.stderr)).toHaveLength(1)
    expect(lines(unreachable.stderr)[0]).toMatch(/^docket: cannot open postgres:\/\/root@127\.0\.0\.1:1\/docket: /)
  })

  it.skipIf(!pgAvailable)("on PostgreSQL, bad input writes nothing either", async () => {
    const db = await freshPgDatabase()
    try {
      const bulk = scratch.write("bad-line.ndjson", `{"kind":"a","payload":1}\n{"kind":"a","payload":1,"delay":"-1s"}\n`)
      const results = await docketAll([
        ["enqueue", "mail.send", "{bad", "--database", db.url],
        ["enqueue", "mail.send", "{}", "--delay", "-1s", "--database", db.url],
        ["enqueue", "--from", bulk, "--database", db.url]
      ])
      expect(results.map((r) => r.code)).toEqual([2, 2, 2])
      expect(lines(results[2].stderr)).toEqual([`docket: line 2: delay must not be negative (got "-1s")`])
      const client = new pg.Client({ connectionString: db.url })
      await client.connect()
      try {
        const tables = await client.query(`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'`)
        expect(tables.rows[0].n).toBe(0)
      } finally {
        await client.end()
      }
    } finally {
      await db.drop()
    }
  })
})

describe("--help", () => {
  it("is generated for the command and its subcommands", async () => {
    const [root, enqueue, worker, retry] = await docketAll([
      ["--help"],
      ["enqueue", "--help"],
      ["worker", "--help"],
      ["dead", "retry", "--help"]
    ])
    for (const r of [root, enqueue, worker, retry]) {
      expect(r.code, r.stderr).toBe(0)
      expect(r.stderr).toBe("")
    }
    const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, "")
    for (const command of ["migrate", "enqueue", "worker", "stats", "dead list", "dead retry", "dead delete", "demo"]) {
      expect(plain(root.stdout)).toContain(`- ${command} `)
    }
    for (const option of ["--key", "--delay", "--run-at", "--priority", "--max-attempts", "--from", "--database"]) {
      expect(plain(enqueue.stdout)).toContain(option)
    }
    for (const option of ["--tasks", "--concurrency", "--lease", "--poll", "--grace"]) {
      expect(plain(worker.stdout)).toContain(option)
    }
    expect(plain(retry.stdout)).toContain("--all")
  })
})

describe("npm start (docket demo)", () => {
  it("runs the example tasks on a fresh SQLite file until the work is done, then says where the dead items are", async () => {
    const result = await docket(["demo"], { timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const out = result.stdout
    expect(out).toMatch(/^Docket demo: a worker over examples\/tasks \(flaky, greet, report\.build, thumbnail\.render\) on (\S+docket\.db)$/m)
    const db = /on (\S+docket\.db)$/m.exec(out)![1]
    expect(out).toMatch(/enqueued 26 items/)
    expect(out).toMatch(/retry flaky #\d+ \(attempt 1 of 8\)/)
    expect(out).toMatch(/dead greet #26 \(attempt 1\): DecodeError/)
    expect(out).toMatch(/^Done in [\d.]+ s: 25 items done, 8 failed attempts retried, 1 dead\.$/m)
    expect(out).toContain(`Dead items stay in ${db} until you retry or delete them:`)
    expect(out).toMatch(/^ {2}#26 greet \{"name":42\}: DecodeError: /m)
    expect(out).toContain(`npx docket dead list --database ${db}`)
    expect(out).toContain(`npx docket dead retry --all --database ${db}`)
    const stats = await docket(["stats", "--json", "--database", db])
    expect(JSON.parse(stats.stdout)).toMatchObject({ due: 0, scheduled: 0, running: 0, dead: 1 })
    // The demo's temporary folder.
    if (/docket-demo-[^/]+\/docket\.db$/.test(db)) rmSync(dirname(db), { recursive: true, force: true })
  })
})
