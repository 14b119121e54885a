/**
 * `docket cancel` end to end, as child processes, on a real SQLite file and
 * on a fresh PostgreSQL database: exit codes (0 all cancelled, 1 some not,
 * 2 bad input and nothing written), a line per id, `stats` counting
 * cancelled items, and a running worker's item interrupted by a cancel from
 * another process (the latency printed).
 */
import { Effect, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { cliBackends, docket, docketAll, lines, noHorizon, openRepo, start, tempDir } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const backends = cliBackends(cleanups)

const repoAt = openRepo(cleanups)

const stateOf = async (repo: ReturnType<typeof repoAt>, id: number) =>
  Option.getOrUndefined(await repo((r) => r.get(id)))

for (const backend of backends) {
  describe.skipIf(backend.skip)(`docket cancel on ${backend.name}`, () => {
    it("cancels by id: exit 0 when all were, 1 with a line per id when some were not, 2 for bad input (nothing written)", async () => {
      const url = await backend.fresh()
      const repo = repoAt(url)
      const [due, later, dead, gone, spare] = await repo((r) =>
        Effect.gen(function*() {
          const a = yield* r.enqueue("mail", { n: 1 })
          const b = yield* r.enqueue("mail", { n: 2 }, { delay: "1 hour" })
          const c = yield* r.enqueue("doomed", { n: 3 })
          const [claim] = yield* r.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["doomed"] })
          yield* r.fail(claim, "broken", { _tag: "Dead" })
          const d = yield* r.enqueue("mail", { n: 4 })
          const e = yield* r.enqueue("mail", { n: 5 })
          return [a.id, b.id, c.id, d.id, e.id] as const
        })
      )
      // Bad input: exit 2, one line, nothing written.
      const bad = await docketAll([
        ["cancel", String(due), "abc", "--database", url],
        ["cancel", "0", "--database", url],
        ["cancel", "--database", url],
        ["cancel", String(due), "--reason", "", "--database", url],
        ["cancel", String(due), "--reason", "x".repeat(1001), "--database", url]
      ])
      for (const r of bad) {
        expect(r.code, r.stdout + r.stderr).toBe(2)
        expect(lines(r.stderr), r.stderr).toHaveLength(1)
        expect(r.stdout).toBe("")
      }
      expect(lines(bad[0].stderr)).toEqual(["docket: 'abc' is not an item id"])
      expect(lines(bad[2].stderr)).toEqual(["docket: give the ids of the items to cancel"])
      expect(lines(bad[3].stderr)).toEqual(["docket: --reason must not be empty (leave it out for none)"])
      expect((await stateOf(repo, due))?.state).toBe("waiting")

      const ok = await docket(["cancel", String(due), String(later), "--reason", "not needed", "--database", url])
      expect(ok.code, ok.stderr).toBe(0)
      expect(lines(ok.stdout)).toEqual([`cancelled ${due} (it was waiting)`, `cancelled ${later} (it was waiting)`])
      expect(ok.stderr).toBe("")
      expect(await stateOf(repo, later)).toMatchObject({ state: "cancelled", lastError: "Cancelled: not needed" })

      await repo((r) => r.cancel([gone]))
      const mixed = await docket(["cancel", String(spare), String(dead), "999999", String(gone), String(due), "--database", url])
      expect(mixed.code).toBe(1)
      expect(lines(mixed.stdout)).toEqual([
        `cancelled ${spare} (it was waiting)`,
        `not cancelled ${dead}: it is dead (docket dead retry or delete it)`,
        "not cancelled 999999: no such item (never enqueued, or finished and pruned)",
        `not cancelled ${gone}: it is cancelled already`,
        `not cancelled ${due}: it is cancelled already`
      ])
      expect(lines(mixed.stderr)).toEqual([`docket: 4 of 5 items not cancelled: ${dead}, 999999, ${gone}, ${due}`])
      expect(await stateOf(repo, dead)).toMatchObject({ state: "dead", lastError: "broken" })

      const [json, stats, text] = await docketAll([
        ["cancel", String(dead), "--json", "--database", url],
        ["stats", "--json", "--database", url],
        ["stats", "--database", url]
      ])
      expect(json.code).toBe(1)
      expect(JSON.parse(json.stdout)).toEqual([{ id: dead, outcome: "finished" }])
      expect(JSON.parse(stats.stdout)).toEqual({
        due: 0,
        scheduled: 0,
        running: 0,
        done: 0,
        dead: 1,
        cancelled: 4,
        byKind: {
          doomed: { due: 0, scheduled: 0, running: 0, done: 0, dead: 1, cancelled: 0 },
          mail: { due: 0, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 4 }
        },
        // Nothing waits, so no kind lacks a worker.
        unhandledKinds: [],
        horizon: noHorizon(backend.name)
      })
      expect(lines(text.stdout)[0]).toMatch(/^kind\s+due\s+scheduled\s+running\s+done\s+dead\s+cancelled$/)
      expect(text.stdout).toMatch(/^total\s+0\s+0\s+0\s+0\s+1\s+4$/m)
    }, 180_000)

    it("a running worker's item is interrupted by a cancel from another process; its job.signal aborts", async () => {
      const url = await backend.fresh()
      const d = tempDir("docket-cancel-tasks-")
      cleanups.push(async () => d.remove())
      d.write("package.json", JSON.stringify({ type: "module" }))
      d.write(
        "hang.mjs",
        `export default (payload, job) => new Promise((resolve) => {
          job.signal.addEventListener("abort", () => { console.log("aborted " + job.id); resolve() })
        })\n`
      )
      // SQLite: no notification across processes; the renewal (a third of the lease) finds the cancel.
      const lease = backend.name === "pg" ? "30s" : "1500ms"
      const added = await docket(["enqueue", "hang", "{}", "--database", url])
      expect(added.code, added.stderr).toBe(0)
      const id = Number(added.stdout.trim())
      const worker = start(["worker", "--tasks", d.dir, "--database", url, "--lease", lease, "--grace", "2s", "--log-items"])
      cleanups.push(async () => void worker.child.kill("SIGKILL"))
      await worker.waitFor(new RegExp(`started hang #${id} `), 30_000)
      const launched = performance.now()
      const cancel = await docket(["cancel", String(id), "--reason", "operator", "--database", url])
      const cancelled = performance.now()
      expect(cancel.code, cancel.stderr).toBe(0)
      expect(cancel.stdout.trim()).toBe(`cancelled ${id} (it was running: its worker stops it)`)
      await worker.waitFor(new RegExp(`aborted ${id}\\n`), 10_000)
      const aborted = performance.now()
      const latency = Math.max(0, aborted - cancelled)
      // The command's exit is seen after its commit, and on PostgreSQL often
      // after the notification has already stopped the run (then 0).
      console.log(
        `docket cancel latency (${backend.name}, lease ${lease}): ${latency.toFixed(0)} ms after the command's exit, ` +
          `${(aborted - launched).toFixed(0)} ms after it was launched (node and tsx start-up included)`
      )
      expect(latency).toBeLessThan(backend.name === "pg" ? 1_000 : 1_500)
      await worker.waitFor(new RegExp(`cancelled hang #${id} \\(stopped here, nothing recorded\\): Cancelled: operator`), 5000)
      worker.child.kill("SIGTERM")
      const exit = await worker.exited
      expect(exit.code, exit.stderr).toBe(0)
      expect(exit.stdout).toMatch(/docket worker stopped: done 0, retried 0, dead 0, given back 0, cancelled 1/)
      expect(exit.stdout).not.toMatch(/lease lost/)
      expect(await stateOf(repoAt(url), id)).toMatchObject({ state: "cancelled", lastError: "Cancelled: operator", attempts: 1 })
    }, 180_000)
  })
}
