/**
 * `docket recurring list` and task files' `recurring` export end to end, as
 * child processes, on a SQLite file and on a fresh PostgreSQL database: a
 * worker over a task file with an every-second schedule enqueues its ticks
 * and runs them (the task records each run's tick in a file); the list shows
 * the schedule, its next and last tick and the last item, as a table and as
 * JSON; a bad `recurring` export is refused at load (exit 2, one line naming
 * the file and the schedule).
 */
import { readFileSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { cliBackends, docket, lines, start, tempDir, waitUntil } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const backends = cliBackends(cleanups)

interface ScheduleJson {
  readonly name: string
  readonly kind: string
  readonly cron: string
  readonly tz: string | null
  readonly payload: unknown
  readonly missed: string
  readonly status: string
  readonly nextTick: number
  readonly lastTick: number | null
  readonly lastItem: { readonly id: number; readonly state: string | null } | null
}

const listed = async (url: string): Promise<Array<ScheduleJson>> => {
  const r = await docket(["recurring", "list", "--json", "--database", url])
  expect(r.code, r.stderr).toBe(0)
  return JSON.parse(r.stdout) as Array<ScheduleJson>
}

describe.each(backends)("docket recurring on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    it("a task file's schedule is declared by its worker, ticks every second, and is listed", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      const d = tempDir("docket-recurring-tasks-")
      cleanups.push(d.remove)
      const log = d.path("runs.jsonl")
      d.write("package.json", JSON.stringify({ type: "module" }))
      d.write(
        "tick.every.mjs",
        `import { appendFileSync } from "node:fs"\n` +
          `export const recurring = { cron: "* * * * * *", payload: { from: "task" }, missed: "skip" }\n` +
          `export default async (payload, job) => {\n` +
          `  appendFileSync(${JSON.stringify(log)}, JSON.stringify({ key: job.key, runAt: job.runAt, payload }) + "\\n")\n}\n`
      )
      d.write("report.daily.mjs", `export const recurring = "0 6 * * *"\nexport default async () => {}\n`)
      expect((await docket(["migrate", "--database", url])).code).toBe(0)
      const empty = await docket(["recurring", "list", "--database", url])
      expect([empty.code, empty.stdout.trim()]).toEqual([0, "no recurring schedules"])
      const worker = start(["worker", "--tasks", d.dir, "--database", url, "--grace", "1s", "--poll", "200ms"])
      cleanups.push(() => void worker.child.kill("SIGKILL"))
      await worker.waitFor(/docket worker \S+ started .*recurring report\.daily \(0 6 \* \* \*\), tick\.every \(\* \* \* \* \* \*\)/, 60_000)
      const runs = () => {
        try {
          return lines(readFileSync(log, "utf8")).map((l) => JSON.parse(l) as { key: string; runAt: number; payload: unknown })
        } catch {
          return []
        }
      }
      await waitUntil("three ticks run", () => runs().length >= 3, 30_000)
      const list = await listed(url)
      expect(list.map((s) => [s.name, s.kind, s.cron, s.tz, s.missed, s.status])).toEqual([
        ["report.daily", "report.daily", "0 6 * * *", null, "one", "live"],
        ["tick.every", "tick.every", "* * * * * *", null, "skip", "live"]
      ])
      const tick = list[1]
      expect(tick.payload).toEqual({ from: "task" })
      expect(tick.lastTick).not.toBeNull()
      expect(tick.nextTick).toBeGreaterThan(tick.lastTick!)
      // The last tick's item: waiting or running, or already run (removed; "done" once history keeps it).
      expect(tick.lastItem?.id).toEqual(expect.any(Number))
      expect([null, "waiting", "running", "done"]).toContain(tick.lastItem?.state)
      expect(list[0].lastTick).toBeNull()
      for (const run of runs()) {
        expect(run.key).toBe(`tick.every@${new Date(run.runAt).toISOString()}`)
        expect(run.payload).toEqual({ from: "task" })
      }
      const table = await docket(["recurring", "list", "--database", url])
      expect(table.code, table.stderr).toBe(0)
      const rows = lines(table.stdout)
      expect(rows[0]).toMatch(/^name\s+kind\s+cron\s+tz\s+missed\s+status\s+next tick\s+last tick\s+last item$/)
      expect(rows[1]).toMatch(/^report\.daily\s+report\.daily\s+0 6 \* \* \*\s+UTC\s+one\s+live\s+\S+T06:00:00Z\s+-\s+-$/)
      expect(rows[2]).toMatch(/^tick\.every\s+tick\.every\s+\* \* \* \* \* \*\s+UTC\s+skip\s+live\s+\S+Z\s+\S+Z\s+\d+ \((waiting|running|removed|done)\)$/)
      expect(rows[3]).toBe("2 live, 0 stopped")
      worker.child.kill("SIGTERM")
      expect((await worker.exited).code).toBe(0)
      // Each tick ran once: no key twice.
      const keys = runs().map((r) => r.key)
      expect(new Set(keys).size).toBe(keys.length)
    })

    it("a bad recurring export is refused at load, naming the file and the schedule", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      expect((await docket(["migrate", "--database", url])).code).toBe(0)
      const cases: ReadonlyArray<readonly [string, RegExp]> = [
        [`"61 * * * *"`, /^docket: task file bad\.kind\.mjs: recurring \(schedule bad\.kind\) cron "61 \* \* \* \*": /],
        [`{ cron: "0 6 * * *", tz: "Mars/Olympus" }`, /^docket: task file bad\.kind\.mjs: recurring \(schedule bad\.kind\) cron .* in Mars\/Olympus: Invalid time zone/],
        [`{ cron: "0 6 * * *", missed: "twice" }`, /recurring \(schedule bad\.kind\) missed must be "skip", "one" or "all"/],
        [`{ cron: "0 6 * * *", every: "1h" }`, /recurring \(schedule bad\.kind\) has an unknown field every/],
        [`42`, /recurring \(schedule bad\.kind\) must be a cron expression or \{ cron, payload, tz, missed \}/]
      ]
      for (const [value, message] of cases) {
        const d = tempDir("docket-recurring-bad-")
        cleanups.push(d.remove)
        d.write("package.json", JSON.stringify({ type: "module" }))
        d.write("bad.kind.mjs", `export const recurring = ${value}\nexport default async () => {}\n`)
        const r = await docket(["worker", "--tasks", d.dir, "--database", url])
        expect(r.code, `${value}: ${r.stdout}${r.stderr}`).toBe(2)
        expect(lines(r.stderr), value).toEqual([expect.stringMatching(message)])
      }
      expect(await listed(url)).toEqual([])
    })
  })
})
