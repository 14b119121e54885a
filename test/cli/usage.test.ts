/**
 * The `docket` command's usage: every kind of bad input exits 2 with one line
 * saying what is wrong and writes nothing; --help on the commands; and the
 * demo that `npm start` runs.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { docket, docketAll, lines, ROOT, runNode, start, tempDir } from "../support/cli.js"
import { freshPgDatabase, pgAvailable } from "../support/db.js"

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
// Syntax errors, each on line 2 (the column in the message is 1-based).
const syntax = (name: string, text: string) => {
  const d = tempDir("docket-tasks-")
  d.write(name, text)
  return d
}
const badMjs = syntax("broken.mjs", "export default async (payload) => {\n  const x = ;\n}\n")
const badTs = syntax("broken.ts", "export default async (payload: unknown) => {\n  const x: number = ;\n}\n")
const badCjs = syntax("broken.cjs", "module.exports = async (payload) => {\n  const x = ;\n}\n")
afterAll(() => [tasks, notAHandler, wrongKind, badMjs, badTs, badCjs].forEach((d) => d.remove()))

describe("bad usage and bad input: exit 2, one line, nothing written", () => {
  const db = scratch.path("never-created.db")
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, RegExp]> = [
    ["bad JSON", ["enqueue", "mail.send", "{to:"], /^docket: the payload is not valid JSON \(/],
    ["an unknown flag", ["enqueue", "mail.send", "{}", "--bogus"], /^docket: unknown option --bogus for docket enqueue$/],
    ["an unknown flag in place of the payload", ["enqueue", "mail.send", "--bogus"], /^docket: unknown option --bogus for docket enqueue$/],
    ["a mistyped flag", ["worker", "--tasks", tasks.dir, "--concurency", "5"], /^docket: unknown option --concurency for docket worker \(did you mean --concurrency\?\)$/],
    ["a flag cut short", ["enqueue", "a", "{}", "--prio", "3"], /^docket: unknown option --prio for docket enqueue \(did you mean --priority\?\)$/],
    ["a removed flag", ["worker", "--tasks", tasks.dir, "--handled-only"], /^docket: --handled-only was removed: .* \(--all-kinds claims every kind\)$/],
    ["a flag without its value", ["enqueue", "a", "{}", "--priority"], /^docket: --priority needs a value$/],
    ["a negative delay", ["enqueue", "mail.send", "{}", "--delay", "-5s"], /^docket: --delay must not be negative \(got "-5s"\)$/],
    ["a bad duration", ["enqueue", "mail.send", "{}", "--delay", "5 parsecs"], /^docket: --delay: "5 parsecs" is not a duration/],
    ["a bad time", ["enqueue", "mail.send", "{}", "--run-at", "tomorrow"], /^docket: --run-at: "tomorrow" is not an ISO 8601 time/],
    ["a delay and a time", ["enqueue", "a", "1", "--delay", "1m", "--run-at", "2030-01-01T00:00:00Z"], /not both$/],
    ["a bad kind", ["enqueue", "mail send", "{}"], /^docket: invalid kind: /],
    ["a bad priority", ["enqueue", "a", "{}", "--priority", "high"], /^docket: --priority: 'high' is not an integer$/],
    ["a fractional priority", ["enqueue", "a", "{}", "--priority=1.5"], /^docket: --priority: '1\.5' is not an integer$/],
    ["a priority out of range", ["enqueue", "a", "{}", "--priority", "3000000000"], /^docket: --priority must be from -2147483647 to 2147483647 \(got 3000000000\)$/],
    ["a bad max attempts", ["enqueue", "a", "{}", "--max-attempts", "0"], /^docket: --max-attempts must be from 1 to 10000 \(got 0\)$/],
    ["no kind", ["enqueue"], /^docket: give the kind of the item/],
    ["a missing bulk file", ["enqueue", "--from", scratch.path("nope.ndjson")], /^docket: --from: file .* does not exist$/],
    ["an unknown command", ["frobnicate"], /^docket: unknown command frobnicate \(commands: migrate, grants, enqueue, worker, stats, workers, list, show, dead, kind, group, recurring, workflow, cancel, dashboard, demo\)$/],
    ["a mistyped command", ["wrker", "--tasks", tasks.dir], /^docket: unknown command wrker \(did you mean worker\?\)$/],
    ["a mistyped subcommand", ["dead", "lst"], /^docket: unknown command dead lst \(did you mean dead list\?\)$/],
    ["a bad log level (before the command)", ["--log-level", "loud", "stats"], /^docket: --log-level: 'loud' is not one of all, trace, debug, info, warning, error, fatal, none$/],
    ["a bad log level (after the command)", ["stats", "--log-level=loud"], /^docket: --log-level: 'loud' is not one of /],
    ["a bad shell for --completions", ["--completions", "fishy"], /^docket: --completions: 'fishy' is not one of sh, bash, fish, zsh$/],
    ["a worker without --tasks", ["worker"], /^docket: Expected to find option: '--tasks'$/],
    ["a missing task folder", ["worker", "--tasks", scratch.path("nope")], /^docket: --tasks: folder .* does not exist$/],
    ["a bad concurrency", ["worker", "--tasks", tasks.dir, "--concurrency", "ten"], /^docket: --concurrency: 'ten' is not an integer$/],
    ["a zero concurrency", ["worker", "--tasks", tasks.dir, "--concurrency", "0"], /^docket: --concurrency must be at least 1 \(got 0\)$/],
    ["a bad lease", ["worker", "--tasks", tasks.dir, "--lease", "long"], /^docket: --lease: "long" is not a duration/],
    ["a short lease", ["worker", "--tasks", tasks.dir, "--lease", "10ms"], /^docket: --lease must be from 1s to 7 days$/],
    ["a bad poll", ["worker", "--tasks", tasks.dir, "--poll", "1 fortnight"], /^docket: --poll: "1 fortnight" is not a duration/],
    ["a bad grace", ["worker", "--tasks", tasks.dir, "--grace", "soon"], /^docket: --grace: "soon" is not a duration/],
    ["a bad log format", ["worker", "--tasks", tasks.dir, "--log-format", "xml"], /^docket: --log-format must be text or json \(got 'xml'\)$/],
    ["a bad summary period", ["worker", "--tasks", tasks.dir, "--summary", "soon"], /^docket: --summary: "soon" is not a duration/],
    ["a too short summary period", ["worker", "--tasks", tasks.dir, "--summary", "10ms"], /^docket: --summary must be at least 100ms, or off$/],
    ["a listen database that is no PostgreSQL URL", ["worker", "--tasks", tasks.dir, "--listen-database", "./other.db"], /^docket: --listen-database \(or DOCKET_LISTEN_DATABASE_URL\) must be a postgres:\/\/ or postgresql:\/\/ URL$/],
    ["a listen database beside a SQLite file", ["worker", "--tasks", tasks.dir, "--listen-database", "postgres://root@127.0.0.1:1/docket"], /^docket: --listen-database \(or DOCKET_LISTEN_DATABASE_URL\) is for PostgreSQL: the database is a SQLite file$/],
    ["a task file that is no handler", ["worker", "--tasks", notAHandler.dir], /^docket: task file broken\.mjs must default-export/],
    ["a handler of another kind", ["worker", "--tasks", wrongKind.dir], /exports the handler of kind email\.send; the file name says mail\.send/],
    ["a syntax error in an ES module", ["worker", "--tasks", badMjs.dir], new RegExp(`^docket: task file broken\\.mjs cannot be loaded: syntax error at ${badMjs.path("broken.mjs")}:2:13: Unexpected token ';'$`)],
    ["a syntax error in TypeScript", ["worker", "--tasks", badTs.dir], new RegExp(`^docket: task file broken\\.ts cannot be loaded: syntax error at ${badTs.path("broken.ts")}:2:21: Unexpected ";"$`)],
    ["a syntax error in CommonJS", ["worker", "--tasks", badCjs.dir], new RegExp(`^docket: task file broken\\.cjs cannot be loaded: syntax error at ${badCjs.path("broken.cjs")}:2:13: Unexpected token ';'$`)],
    ["dead retry without ids", ["dead", "retry"], /^docket: give the ids of dead items, or --all$/],
    ["dead retry of a bad id", ["dead", "retry", "12", "abc"], /^docket: 'abc' is not an item id$/],
    ["ids and --all", ["dead", "delete", "3", "--all"], /^docket: give ids or --all, not both$/],
    ["stats of a queue that does not exist", ["stats"], /^docket: no queue at .*never-created\.db \(docket migrate, enqueue or worker makes one\)$/],
    ["workers of a queue that does not exist", ["workers"], /^docket: no queue at .*never-created\.db \(docket migrate, enqueue or worker makes one\)$/],
    ["an unknown flag for workers", ["workers", "--all"], /^docket: unknown option --all for docket workers$/],
    ["an argument workers does not take", ["workers", "w1"], /^docket: /],
    ["cancel without ids", ["cancel"], /^docket: give the ids of the items to cancel$/],
    ["cancel of a bad id", ["cancel", "12", "1.5"], /^docket: '1\.5' is not an item id$/],
    ["cancel with an empty reason", ["cancel", "12", "--reason", ""], /^docket: --reason must not be empty/],
    ["cancel on a queue that does not exist", ["cancel", "12"], /^docket: no queue at .*never-created\.db \(docket migrate, enqueue or worker makes one\)$/]
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
  }, 240_000)

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

  it("DOCKET_LISTEN_DATABASE_URL is read as --listen-database is: beside a SQLite file, refused", async () => {
    const r = await docket(["worker", "--tasks", tasks.dir, "--database", db], {
      env: { DOCKET_LISTEN_DATABASE_URL: "postgres://root@127.0.0.1:1/docket" }
    })
    expect(r.code).toBe(2)
    expect(lines(r.stderr)).toEqual([
      "docket: --listen-database (or DOCKET_LISTEN_DATABASE_URL) is for PostgreSQL: the database is a SQLite file"
    ])
    expect(existsSync(db)).toBe(false)
  })

  it("a bad DOCKET_HEAP_GROWING_PERCENT is refused before anything runs; a good one is taken", async () => {
    const bulk = scratch.write("heap.ndjson", `{"kind":"a","payload":1}\n`)
    const run = (database: string, value: string) =>
      docket(["enqueue", "--from", bulk, "--database", database], { env: { DOCKET_HEAP_GROWING_PERCENT: value } })
    const [bad, negative, good, zero] = [
      await run(db, "lots"),
      await run(db, "-5"),
      await run(scratch.path("heap-50.db"), "50"),
      await run(scratch.path("heap-0.db"), "0")
    ]
    for (const [result, value] of [[bad, "lots"], [negative, "-5"]] as const) {
      expect(result.code).toBe(2)
      expect(lines(result.stderr)).toEqual([
        `docket: DOCKET_HEAP_GROWING_PERCENT must be a whole number from 0 to 1000 (0: V8's own choice), not "${value}"`
      ])
    }
    expect(existsSync(db)).toBe(false)
    expect([good.code, good.stdout.trim()]).toEqual([0, "enqueued 1 item"])
    expect([zero.code, zero.stdout.trim()]).toEqual([0, "enqueued 1 item"])
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
  const commands = [
    "migrate", "enqueue", "worker", "stats", "workers", "list", "show", "dead", "dead list", "dead retry", "dead delete",
    "group", "group list", "group pause", "group resume", "recurring", "recurring list", "workflow", "workflow list",
    "workflow show", "workflow interrupt", "workflow resume",
    "workflow complete", "cancel", "dashboard", "demo"
  ]

  it("is generated for the command and its subcommands, within 100 columns", { timeout: 180_000 }, async () => {
    const results = await docketAll([["--help"], ...commands.map((c) => [...c.split(" "), "--help"])])
    for (const r of results) {
      expect(r.code, r.stderr).toBe(0)
      expect(r.stderr).toBe("")
      expect(r.stdout).not.toMatch(/\x1b\[/)
      for (const line of r.stdout.split("\n")) expect(line.length, line).toBeLessThanOrEqual(100)
      expect(r.stdout).not.toContain("A user-defined piece of text")
      expect(r.stdout).not.toContain("This setting is optional")
      // A usage line breaks only between options, never inside brackets.
      const usage = /^USAGE\n((?: {2}.*\n)+)/m.exec(r.stdout)![1]
      for (const line of usage.trimEnd().split("\n")) {
        expect(line.split("[").length, line).toBe(line.split("]").length)
        expect(line.split("<").length, line).toBe(line.split(">").length)
      }
    }
    const [root, ...byCommand] = results.map((r) => r.stdout)
    const help = Object.fromEntries(commands.map((c, i) => [c, byCommand[i]]))
    for (const command of commands) {
      expect(root).toMatch(new RegExp(`^  ${command} +[A-Z]`, "m"))
      // The usage line names the whole command.
      expect(help[command]).toMatch(new RegExp(`^USAGE\\n  docket ${command}( |$)`, "m"))
    }
    expect(help["dead"]).toMatch(/^USAGE\n  docket dead <command>$/m)
    for (const option of ["--key <key>", "--on-conflict keep | replace | debounce | replaceRunning", "--delay <duration>", "--run-at <time>", "--priority <integer>", "--max-attempts <integer>", "--from <file>", "-d, --database <url>"]) {
      expect(help["enqueue"]).toContain(`\n  ${option}\n`)
    }
    expect(help["enqueue"]).toMatch(/^ARGUMENTS\n  <kind>\n/m)
    // Typed, with the defaults.
    expect(help["worker"]).toMatch(/^  --concurrency <integer>\n(      .*\n)*      Default: 10\.$/m)
    expect(help["worker"]).toMatch(/^  --lease <duration>\n(      .*\n)*      Default: 30s\.$/m)
    expect(help["worker"]).toMatch(/^  --poll <duration>\n(      .*\n)*      Default: 2s\.$/m)
    expect(help["worker"]).toMatch(/^  --grace <duration>\n(      .*\n)*      Default: 10s\.$/m)
    expect(help["worker"]).toMatch(/^  --retention <duration\|state=duration,...>\n(      .*\n)*      Default: done=24h,cancelled=24h,dead=forever\.$/m)
    expect(help["list"]).toMatch(/^  --state <state>\n      Only items in this state: waiting \(due now\), scheduled/m)
    expect(help["list"]).toMatch(/^  --limit <integer>\n(      .*\n)*      Default: 50\.$/m)
    expect(help["show"]).toMatch(/^ARGUMENTS\n  <id>\n/m)
    expect(help["worker"]).toMatch(/^  --log-items\n      Also log a line per routine item event/m)
    expect(help["worker"]).toMatch(/^  --log-format <text\|json>\n(      .*\n)*      Default: text\.$/m)
    expect(help["worker"]).toMatch(/^  --summary <duration\|off>\n(      .*\n)*      Default: 60s\.$/m)
    expect(help["worker"]).toMatch(/^  --all-kinds\n      Claim items of every kind: an item of a kind with no task file here is dead at once\./m)
    expect(help["worker"]).not.toContain("--handled-only")
    expect(help["dead retry"]).toContain("\n  --all\n")
    // Global flags: listed in the root's help, and only named under a command (they work after it too).
    expect(root).toMatch(/^GLOBAL OPTIONS \(before or after the command\)\n  --log-level all \| trace/m)
    for (const command of commands) {
      expect(help[command]).not.toMatch(/^  --log-level/m)
      expect(help[command]).not.toMatch(/^  --completions/m)
    }
  })

  it("global flags work after the command too", async () => {
    const db = scratch.path("never-created.db")
    const [before, after, helpAfter] = await docketAll([
      ["--log-level", "debug", "stats", "--database", db],
      ["stats", "--database", db, "--log-level", "debug"],
      ["worker", "--log-level=info", "--help"]
    ])
    for (const r of [before, after]) {
      expect(r.code).toBe(2)
      expect(lines(r.stderr)).toEqual([`docket: no queue at ${db} (docket migrate, enqueue or worker makes one)`])
    }
    expect(helpAfter.code, helpAfter.stderr).toBe(0)
    expect(helpAfter.stdout).toMatch(/^USAGE\n  docket worker /m)
  })
})

/** The words of a shell command line (single and double quotes, no expansions). */
const shellWords = (line: string): Array<string> =>
  [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3])

describe("the README's command examples", () => {
  it("run as written, one command a line", async () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8")
    const section = readme.slice(readme.indexOf("## Without writing Effect code"))
    const block = /```sh\n([\s\S]*?)```/.exec(section)![1]
    const commands = block.split("\n").map((l) => l.replace(/\s+#.*$/, "").trim()).filter((l) => l !== "")
    expect(commands.length).toBeGreaterThanOrEqual(5)
    const cwd = tempDir("docket-readme-")
    mkdirSync(cwd.path("tasks"))
    writeFileSync(cwd.path("tasks", "email.send.mjs"), "export default async () => {}\n")
    try {
      for (const command of commands) {
        expect(command, "a command per line, no pipes").not.toMatch(/[|;&]/)
        const words = shellWords(command)
        expect(words.slice(0, 2), command).toEqual(["npx", "docket"])
        const args = words.slice(2)
        if (args[0] === "worker") {
          const worker = start(args, { cwd: cwd.dir })
          await worker.waitFor(/docket worker \S+ started/)
          worker.child.kill("SIGTERM")
          const exit = await worker.exited
          expect(exit.code, `${command}: ${exit.stderr}`).toBe(0)
          continue
        }
        const result = await docket(args, { cwd: cwd.dir })
        // 1 is allowed for "not dead (or no such item)": the ids are an example.
        expect(result.code === 0 || /^docket: not dead/.test(result.stderr), `${command}: ${result.stderr}`).toBe(true)
      }
    } finally {
      cwd.remove()
    }
  })
})

describe("npm start (docket demo)", () => {
  it("runs the example tasks on a fresh SQLite file until the work is done, then says where the dead items are", async () => {
    // What `npm start` runs: the checkout's bin/docket.mjs (the sources under
    // tsx), whichever command the other tests run (DOCKET_TEST_COMMAND).
    const result = await runNode(["bin/docket.mjs", "demo"], { timeoutMs: 60_000 })
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
    expect(out).toContain(`npx docket list --state done --database ${db}`)
    expect(out).toContain(`npx docket dashboard --database ${db}`)
    const stats = await docket(["stats", "--json", "--database", db])
    expect(JSON.parse(stats.stdout)).toMatchObject({ due: 0, scheduled: 0, running: 0, done: 25, dead: 1 })
    // The dashboard the demo points to, on its database: every page, the dead item, the counters.
    const dashboard = start(["dashboard", "--database", db, "--port", "0"])
    try {
      await dashboard.waitFor(/listening on http:\/\/127\.0\.0\.1:\d+/)
      const root = /http:\/\/127\.0\.0\.1:\d+/.exec(dashboard.stdout)![0]
      for (const path of ["/", "/items", "/items?state=dead", "/items/26", "/kinds", "/recurring", "/workers"]) {
        expect((await fetch(`${root}${path}`)).status, path).toBe(200)
      }
      expect(await (await fetch(`${root}/items?state=dead`)).text()).toContain(`href="/items/26"`)
      expect(await (await fetch(`${root}/api/items/26`)).json()).toMatchObject({ id: 26, kind: "greet", state: "dead" })
      const metrics = await (await fetch(`${root}/metrics`)).text()
      expect(metrics).toContain(`docket_finished_total{kind="greet",state="dead"} 1`)
      expect(metrics).toMatch(/^docket_retried_total\{kind="flaky"\} 8$/m)
    } finally {
      dashboard.child.kill("SIGTERM")
      expect((await dashboard.exited).code).toBe(0)
    }
    // The demo's temporary folder.
    if (/docket-demo-[^/]+\/docket\.db$/.test(db)) rmSync(dirname(db), { recursive: true, force: true })
  })
})
