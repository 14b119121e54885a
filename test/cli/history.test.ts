/**
 * `docket show`, `docket list` and `docket worker --retention` end to end, as
 * child processes, on a real SQLite file and on a fresh PostgreSQL database:
 * every field and the attempts' errors shown (hostile text kept), JSON items
 * with the fields tools need, pages followed by their cursor, bad input
 * refused (exit 2, one line, nothing written), and a worker keeping a task's
 * returned value or deleting at once with a retention of 0.
 */
import { Effect, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { cliBackends, docket, docketAll, lines, openRepo, start, tempDir } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const backends = cliBackends(cleanups)

const repoAt = openRepo(cleanups)

const HOSTILE_ERROR = `it's "bad"\nline 2 \\ back\tslash ✓ {"json": true}`

/** The fields every JSON item carries for tools (issue 17). */
const JSON_FIELDS = [
  "id", "kind", "state", "payload", "key", "priority", "runAt", "attempts", "maxAttempts", "lastError", "errors", "result",
  "createdAt", "finishedAt"
]

for (const backend of backends) {
  describe.skipIf(backend.skip)(`docket show and list on ${backend.name}`, () => {
    it("show: every field, the attempts' errors and the result; --json the item as stored; a missing id exit 1, a bad one 2", async () => {
      const url = await backend.fresh()
      const repo = repoAt(url)
      const { done, failed } = await repo((r) =>
        Effect.gen(function*() {
          const a = yield* r.enqueue("mail.send", { to: "a@example.com" }, { key: "msg-1", priority: 3, maxAttempts: 5 })
          for (const error of ["Retry: first", HOSTILE_ERROR]) {
            const [claim] = yield* r.claim({ worker: "host:1", limit: 1, lease: "1 minute" })
            yield* r.fail(claim, error, { _tag: "Retry", delay: 0 })
          }
          const [claim] = yield* r.claim({ worker: "host:2", limit: 1, lease: "1 minute" })
          yield* r.complete(claim, { messageId: "<x@y>", note: HOSTILE_ERROR })
          const b = yield* r.enqueue("report", { n: 1 })
          const [c] = yield* r.claim({ worker: "host:3", limit: 1, lease: "1 minute" })
          yield* r.fail(c, HOSTILE_ERROR, { _tag: "Dead" })
          return { done: a.id, failed: b.id }
        })
      )
      const [text, json, deadText, missing, bad] = await docketAll([
        ["show", String(done), "--database", url],
        ["show", String(done), "--json", "--database", url],
        ["show", String(failed), "--database", url],
        ["show", "999999", "--database", url],
        ["show", "abc", "--database", url]
      ])
      expect(text.code, text.stderr).toBe(0)
      const shown = text.stdout
      for (const line of [/^id +\d+$/m, /^kind +mail\.send$/m, /^state +done$/m, /^key +msg-1$/m, /^priority +3$/m,
        /^attempts +3 of 5$/m, /^ran by +host:2$/m, /^finished +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/m]) {
        expect(shown).toMatch(line)
      }
      expect(shown).toContain(`"messageId": "<x@y>"`)
      expect(shown).toMatch(/^attempt errors \(2, oldest first\):$/m)
      expect(shown).toMatch(/^ {2}attempt 1 {2}\S+Z {2}host:1\n {4}Retry: first$/m)
      // The multi-line error kept, each line indented under its attempt.
      expect(shown).toContain(`  attempt 2  `)
      expect(shown).toContain(`    it's "bad"\n    line 2 \\ back\tslash ✓ {"json": true}`)

      expect(json.code, json.stderr).toBe(0)
      const item = JSON.parse(json.stdout) as QueueRepo.Item
      for (const field of JSON_FIELDS) expect(Object.keys(item)).toContain(field)
      expect(item).toEqual(JSON.parse(JSON.stringify(Option.getOrThrow(await repo((r) => r.get(done))))))
      expect(item.result).toEqual({ messageId: "<x@y>", note: HOSTILE_ERROR })
      expect(item.errors.map((e) => [e.attempt, e.worker, e.error])).toEqual([[1, "host:1", "Retry: first"], [2, "host:1", HOSTILE_ERROR]])

      expect(deadText.stdout).toMatch(/^state +dead$/m)
      expect(deadText.stdout).toMatch(/^claimed by +-$/m)
      expect(deadText.stdout).toMatch(/^result +-$/m)
      expect(missing.code).toBe(1)
      expect(lines(missing.stderr)).toEqual(["docket: no item 999999 (never enqueued, or finished and pruned)"])
      expect(bad.code).toBe(2)
      expect(lines(bad.stderr)).toEqual(["docket: 'abc' is not an item id"])
    }, 180_000)

    it("list: newest first a page at a time; following the printed cursor lists every item once; bad input exit 2", async () => {
      const url = await backend.fresh()
      const repo = repoAt(url)
      const ids = await repo((r) =>
        Effect.gen(function*() {
          const added = yield* r.enqueueMany(Array.from({ length: 7 }, (_, i) => ({ kind: i % 2 === 0 ? "even" : "odd", payload: i })))
          const claims = yield* r.claim({ worker: "w", limit: 3, lease: "1 minute" })
          yield* r.completeMany(claims.map((claim, i) => ({ claim, result: { i } })))
          return added.map((a) => a.id)
        })
      )
      // Text: the last line says how to get the next page.
      const seen: Array<number> = []
      let args = ["list", "--limit", "3", "--database", url]
      for (let page = 0; page < 5; page++) {
        const r = await docket(args)
        expect(r.code, r.stderr).toBe(0)
        const out = lines(r.stdout)
        expect(out[0]).toMatch(/^id\s+kind\s+state\s+attempts\s+when\s+result \/ last error$/)
        seen.push(...out.slice(1, -1).map((l) => Number(l.trim().split(/\s+/)[0])))
        const last = out.at(-1)!
        if (last === "no more items") break
        const next = /^more: docket list --limit 3 --cursor (\S+)$/.exec(last)
        expect(next, last).not.toBeNull()
        args = ["list", "--limit", "3", "--cursor", next![1], "--database", url]
      }
      expect(seen).toEqual([...ids].reverse())

      // JSON, by state and kind: { items, cursor }.
      const [done, doneEven, waiting] = await docketAll([
        ["list", "--state", "done", "--json", "--database", url],
        ["list", "--state", "done", "--kind", "even", "--json", "--database", url],
        ["list", "--state", "waiting", "--limit", "2", "--json", "--database", url]
      ])
      const donePage = JSON.parse(done.stdout) as QueueRepo.ItemPage
      expect(donePage.cursor).toBeNull()
      expect(donePage.items.map((i) => i.state)).toEqual(["done", "done", "done"])
      for (const field of JSON_FIELDS) expect(Object.keys(donePage.items[0])).toContain(field)
      expect(JSON.parse(doneEven.stdout).items.every((i: QueueRepo.Item) => i.kind === "even")).toBe(true)
      const waitingPage = JSON.parse(waiting.stdout) as QueueRepo.ItemPage
      expect(waitingPage.items.map((i) => i.id)).toEqual([ids[6], ids[5]])
      const rest = await docket(["list", "--state", "waiting", "--limit", "2", "--cursor", waitingPage.cursor!, "--json", "--database", url])
      expect((JSON.parse(rest.stdout) as QueueRepo.ItemPage).items.map((i) => i.id)).toEqual([ids[4], ids[3]])

      const bad = await docketAll([
        ["list", "--state", "finished", "--database", url],
        ["list", "--limit", "0", "--database", url],
        ["list", "--cursor", "nonsense", "--database", url],
        ["list", "--state", "done", "--cursor", waitingPage.cursor!, "--database", url]
      ])
      for (const r of bad) {
        expect(r.code, r.stdout + r.stderr).toBe(2)
        expect(lines(r.stderr), r.stderr).toHaveLength(1)
        expect(r.stdout).toBe("")
      }
      expect(bad[0].stderr).toMatch(/^docket: invalid state: must be one of waiting, scheduled, running, done, dead, cancelled$/m)
      expect(bad[3].stderr).toMatch(/another listing/)
      const empty = await docket(["list", "--state", "cancelled", "--database", url])
      expect(empty.stdout.trim()).toBe("no items")
    }, 180_000)

    it("worker --retention: bad values refused; a task's returned value kept with the done item; 0 deletes at once", async () => {
      const url = await backend.fresh()
      const d = tempDir("docket-history-tasks-")
      cleanups.push(async () => d.remove())
      d.write("package.json", JSON.stringify({ type: "module" }))
      d.write("echo.mjs", `export default async (payload) => ({ echoed: payload, note: ${JSON.stringify(HOSTILE_ERROR)} })\n`)
      const refused = await docketAll([
        ["worker", "--tasks", d.dir, "--retention", "soon", "--database", url],
        ["worker", "--tasks", d.dir, "--retention", "done=1h,bogus=2h", "--database", url],
        ["worker", "--tasks", d.dir, "--retention", "done=1h,done=2h", "--database", url]
      ])
      for (const r of refused) {
        expect(r.code, r.stdout + r.stderr).toBe(2)
        expect(lines(r.stderr), r.stderr).toHaveLength(1)
      }
      expect(refused[1].stderr).toMatch(/"bogus" is not done, cancelled or dead/)

      const runOnce = async (retention: string, payload: string) => {
        const added = await docket(["enqueue", "echo", payload, "--database", url])
        expect(added.code, added.stderr).toBe(0)
        const id = Number(added.stdout.trim())
        const worker = start(["worker", "--tasks", d.dir, "--retention", retention, "--database", url, "--log-items"])
        cleanups.push(async () => void worker.child.kill("SIGKILL"))
        await worker.waitFor(new RegExp(`done echo #${id} `), 30_000)
        worker.child.kill("SIGTERM")
        const exit = await worker.exited
        expect(exit.code, exit.stderr).toBe(0)
        return { id, stdout: exit.stdout }
      }
      // Retention 0 first: a worker prunes by its own retention (the shortest
      // wins, docs/operations.md), so a retention-0 worker started after the
      // kept item would delete it too, whenever its first prune pass came
      // (0-10 s after its start) before it stopped.
      const gone = await runOnce("0", `{"n": 2}`)
      expect(gone.stdout).toMatch(/keeps finished items: done 0 \(deleted at once\), cancelled 0 \(deleted at once\), dead forever/)
      expect((await docket(["show", String(gone.id), "--database", url])).code).toBe(1)
      const kept = await runOnce("done=1h,cancelled=7d,dead=30d", `{"n": 1}`)
      expect(kept.stdout).toMatch(/keeps finished items: done 1h, cancelled 168h, dead 720h/)
      const shown = JSON.parse((await docket(["show", String(kept.id), "--json", "--database", url])).stdout)
      expect(shown).toMatchObject({ state: "done", result: { echoed: { n: 1 }, note: HOSTILE_ERROR } })
      const stats = JSON.parse((await docket(["stats", "--json", "--database", url])).stdout)
      expect(stats).toMatchObject({ done: 1, due: 0 })
    }, 180_000)
  })
}
