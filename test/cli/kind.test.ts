/**
 * `docket kind` end to end, as a child process, on a SQLite file and on a
 * fresh PostgreSQL database: set, pause, list, resume, reset; bad input
 * refused (exit 2, one line, nothing written); a task file's declared global
 * limits written when its worker starts, unless a person set the kind's; a
 * person's per-group limits obeyed by claims until reset; the per-group
 * limits, who set them and the paused groups listed (text and --json).
 */
import { afterAll, describe, expect, it } from "vitest"
import { cliBackends, docket, lines, openRepo, start, tempDir } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const backends = cliBackends(cleanups)
const repoAt = openRepo(cleanups)

interface KindJson {
  readonly kind: string
  readonly paused: boolean
  readonly concurrency: number | null
  readonly rate: { readonly limit: number; readonly periodMs: number } | null
  readonly limitsSetBy: string
  readonly perGroup: Record<string, unknown> | null
  readonly pausedGroups: number
  readonly counts: Record<string, number>
}

const kindsOf = async (url: string): Promise<Array<KindJson>> => {
  const listed = await docket(["kind", "list", "--json", "--database", url])
  expect(listed.code, listed.stderr).toBe(0)
  return JSON.parse(listed.stdout) as Array<KindJson>
}

describe.each(backends)("docket kind on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    it("sets limits, pauses, lists, resumes and resets a kind", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      expect((await docket(["enqueue", "mail.send", "{}", "--database", url])).code).toBe(0)
      const set = await docket(["kind", "set", "mail.send", "--concurrency", "2", "--rate", "100/1m", "--database", url])
      expect(set.code, set.stderr).toBe(0)
      expect(set.stdout).toMatch(/^mail\.send: concurrency 2, rate 100\/1m \(set by a person/)
      const paused = await docket(["kind", "pause", "mail.send", "--database", url])
      expect(paused.code, paused.stderr).toBe(0)
      expect(await kindsOf(url)).toEqual([{
        kind: "mail.send",
        paused: true,
        concurrency: 2,
        rate: { limit: 100, periodMs: 60_000 },
        limitsSetBy: "person",
        perGroup: null,
        pausedGroups: 0,
        counts: { waiting: 1, scheduled: 0, running: 0, expired: 0, done: 0, dead: 0, cancelled: 0 }
      }])
      const table = await docket(["kind", "list", "--database", url])
      expect(lines(table.stdout)).toEqual([
        expect.stringMatching(
          /^kind\s+paused\s+concurrency\s+rate\s+set by\s+per group\s+group set by\s+paused groups\s+waiting\s+scheduled\s+running\s+done\s+dead\s+cancelled$/
        ),
        expect.stringMatching(/^mail\.send\s+paused\s+2\s+100\/1m\s+person\s+-\s+-\s+0\s+1\s+0\s+0\s+0\s+0\s+0$/)
      ])
      // One limit removed, the other kept.
      expect((await docket(["kind", "set", "mail.send", "--concurrency", "none", "--database", url])).code).toBe(0)
      expect((await kindsOf(url))[0]).toMatchObject({ concurrency: null, rate: { limit: 100, periodMs: 60_000 } })
      const resumed = await docket(["kind", "resume", "mail.send", "--database", url])
      expect(resumed.code, resumed.stderr).toBe(0)
      const reset = await docket(["kind", "reset", "mail.send", "--database", url])
      expect(reset.code, reset.stderr).toBe(0)
      expect((await kindsOf(url))[0]).toMatchObject({ paused: false, concurrency: null, rate: null, limitsSetBy: "code" })
    })

    it("sets and resets a kind's per-group limits; claims obey them", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      for (const n of [1, 2]) {
        expect((await docket(["enqueue", "hook", JSON.stringify({ n }), "--group", "a", "--database", url])).code).toBe(0)
      }
      const set = await docket([
        "kind", "set", "hook", "--per-group-concurrency", "1", "--per-group-rate", "10/1m", "--database", url
      ])
      expect(set.code, set.stderr).toBe(0)
      expect(set.stdout).toMatch(/^hook: per-group concurrency 1, per-group rate 10\/1m \(set by a person/)
      const repo = repoAt(url)
      const claim = () => repo((r) => r.claim({ worker: "w", limit: 10, lease: "1 minute" }))
      expect((await claim()).length).toBe(1)
      // Listed with who set them, and the paused groups counted.
      expect((await docket(["group", "pause", "hook", "b", "--database", url])).code).toBe(0)
      expect((await kindsOf(url))[0]).toMatchObject({
        perGroup: { concurrency: 1, ordered: false, onFailure: "wait", onDead: "release", rate: { limit: 10, periodMs: 60_000 }, setBy: "person" },
        pausedGroups: 1
      })
      const table = await docket(["kind", "list", "--database", url])
      expect(lines(table.stdout)[1]).toMatch(/^hook\s+-\s+-\s+-\s+-\s+1,10\/1m\s+person\s+1\s+1\s+0\s+1\s+0\s+0\s+0$/)
      expect((await docket(["kind", "reset", "hook", "--database", url])).code).toBe(0)
      // Handed back to the code, which declared none: the group is a label again.
      expect((await claim()).length).toBe(1)
      expect((await kindsOf(url))[0]).toMatchObject({ perGroup: null, pausedGroups: 1 })
    })

    it("refuses bad input with exit 2 and one line, and writes nothing", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      expect((await docket(["migrate", "--database", url])).code).toBe(0)
      const refusals: Array<[ReadonlyArray<string>, RegExp]> = [
        [["set", "k", "--concurrency", "0"], /--concurrency must be at least 1/],
        [["set", "k", "--concurrency", "-3"], /--concurrency must be at least 1/],
        [["set", "k", "--concurrency", "two"], /--concurrency: 'two' is not an integer/],
        [["set", "k", "--rate", "20"], /--rate: "20" is not a rate/],
        [["set", "k", "--rate", "0/1s"], /invalid rate: must be an integer from 1/],
        [["set", "k", "--rate", "5/0s"], /invalid rate: must be from 1 to/],
        [["set", "k", "--rate", "5/soon"], /is not a duration/],
        [["set", "k"], /give --concurrency, --rate, --per-group-concurrency or --per-group-rate/],
        [["set", "k", "--per-group-concurrency", "0"], /--per-group-concurrency must be from 1 to 10000/],
        [["set", "k", "--per-group-concurrency", "10001"], /--per-group-concurrency must be from 1 to 10000/],
        [["set", "k", "--per-group-rate", "5"], /--per-group-rate: "5" is not a rate/],
        [["set", "k", "--per-group-rate", "0/1s"], /invalid perGroup: rate must be an integer from 1/],
        [["set", "bad kind!", "--concurrency", "1"], /kind 'bad kind!' may hold only/],
        [["pause", "bad kind!"], /kind 'bad kind!' may hold only/]
      ]
      for (const [args, message] of refusals) {
        const r = await docket(["kind", ...args, "--database", url])
        expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(2)
        expect(lines(r.stderr), args.join(" ")).toEqual([expect.stringMatching(message)])
      }
      expect(await kindsOf(url)).toEqual([])
    })

    it("a task file's declared global limits are written at its worker's start; a person's setting wins", {
      timeout: 180_000
    }, async () => {
      const url = await backend.fresh()
      const d = tempDir("docket-kind-tasks-")
      cleanups.push(d.remove)
      d.write("package.json", JSON.stringify({ type: "module" }))
      d.write(
        "mail.send.mjs",
        `export const options = { global: { concurrency: 3, rate: "20/1s" } }\nexport default async () => {}\n`
      )
      d.write("report.mjs", `export const options = { global: { concurrency: 1 } }\nexport default async () => {}\n`)
      d.write(
        "hook.mjs",
        `export const options = { perGroup: { concurrency: 1, ordered: true, onDead: "hold" } }\nexport default async () => {}\n`
      )
      // A queue that does not exist yet is refused (a mistyped path), not made.
      if (backend.name === "sqlite") {
        const missing = await docket(["kind", "set", "report", "--concurrency", "9", "--database", url])
        expect([missing.code, missing.stderr.trim()]).toEqual([2, expect.stringMatching(/no queue at .*docket migrate/)])
      }
      expect((await docket(["migrate", "--database", url])).code).toBe(0)
      expect((await docket(["kind", "set", "report", "--concurrency", "9", "--database", url])).code).toBe(0)
      const worker = start(["worker", "--tasks", d.dir, "--database", url, "--grace", "1s"])
      cleanups.push(() => void worker.child.kill("SIGKILL"))
      await worker.waitFor(/docket worker \S+ started/, 60_000)
      const kinds = await kindsOf(url)
      expect(kinds.map((k) => [k.kind, k.concurrency, k.rate, k.limitsSetBy])).toEqual([
        ["hook", null, null, "code"],
        ["mail.send", 3, { limit: 20, periodMs: 1000 }, "code"],
        ["report", 9, null, "person"]
      ])
      expect(kinds[0]!.perGroup).toEqual({
        concurrency: 1, ordered: true, onFailure: "wait", onDead: "hold", rate: null, setBy: "code"
      })
      expect(lines((await docket(["kind", "list", "--database", url])).stdout)[1]).toMatch(
        /^hook\s+-\s+-\s+-\s+-\s+1,ordered,dead:hold\s+code\s+0\s/
      )
      worker.child.kill("SIGTERM")
      expect((await worker.exited).code).toBe(0)
      // A bad declaration names the file, before the worker starts.
      d.write("bad.mjs", `export const options = { global: { concurrency: 0 } }\nexport default async () => {}\n`)
      const refused = await docket(["worker", "--tasks", d.dir, "--database", url])
      expect(refused.code).toBe(2)
      expect(refused.stderr).toMatch(/task file .*bad\.mjs: options\.global: invalid concurrency/)
    })
  })
})
