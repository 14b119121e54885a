/**
 * `docket enqueue --key K --on-conflict MODE` end to end, as child processes,
 * on a real SQLite file and on a fresh PostgreSQL database: what each mode
 * prints and stores, a bad mode refused (exit 2, nothing written), and the
 * bulk file's per-line `onConflict`.
 */
import { Effect, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { cliBackends, docket, openRepo, tempDir } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const backends = cliBackends(cleanups)
const repoAt = openRepo(cleanups)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`docket enqueue --on-conflict on ${backend.name}`, () => {
    it("replace, replaceRunning and a bad mode; a bulk file's onConflict", { timeout: 120_000 }, async () => {
      const url = await backend.fresh()
      const first = await docket(["enqueue", "sync", `{"v":1}`, "--key", "k", "--database", url])
      expect(first.code, first.stderr).toBe(0)
      const id = Number(first.stdout.trim())
      // One at a time: a command through @effect/cli starts slowly on a loaded machine.
      const replaced = await docket(["enqueue", "sync", `{"v":2}`, "--key", "k", "--on-conflict", "replace", "--database", url])
      const bad = await docket(["enqueue", "sync", `{"v":3}`, "--key", "k", "--on-conflict", "drop", "--database", url])
      expect(replaced.code, replaced.stderr).toBe(0)
      expect(replaced.stdout.trim()).toBe(`replaced: item ${id} of kind sync with key k waits with the new payload`)
      for (const r of [bad]) {
        expect(r.code, r.stdout + r.stderr).toBe(2)
        expect(r.stdout).toBe("")
      }
      const repo = repoAt(url)
      const item = Option.getOrThrow(await repo((r) => r.get(id)))
      expect(item.payload).toEqual({ v: 2 })

      // A running item of the key is cancelled; the new payload is a new item.
      const claim = await repo((r) =>
        Effect.map(r.claim({ worker: "holder", limit: 1, lease: "1 minute", kinds: ["sync"] }), (claims) => claims[0])
      )
      const running = await docket(["enqueue", "sync", `{"v":5}`, "--key", "k", "--on-conflict", "replaceRunning", "-d", url])
      expect(running.code, running.stderr).toBe(0)
      const said = /^(\d+) \(cancelled running item (\d+)\)$/.exec(running.stdout.trim())
      expect(said, running.stdout).not.toBeNull()
      expect(Number(said![2])).toBe(claim.id)
      const newId = Number(said![1])
      expect(await repo((r) => r.complete(claim))).toBe(false)

      // Bulk: per line.
      const d = tempDir()
      cleanups.push(d.remove)
      const file = d.write(
        "items.ndjson",
        [
          `{"kind":"sync","payload":{"v":6},"key":"k","onConflict":"replace"}`,
          `{"kind":"sync","payload":{"v":7},"key":"k"}`,
          `{"kind":"sync","payload":{"v":8},"key":"j","onConflict":"debounce","delay":"1m"}`
        ].join("\n") + "\n"
      )
      const bulk = await docket(["enqueue", "--from", file, "--database", url])
      expect(bulk.code, bulk.stderr).toBe(0)
      expect(bulk.stdout.trim()).toBe("enqueued 1 item (1 deduplicated); replaced 1 waiting item")
      expect(Option.getOrThrow(await repo((r) => r.get(newId))).payload).toEqual({ v: 6 })
      const badLine = d.write("bad.ndjson", `{"kind":"sync","payload":1,"key":"z","onConflict":"never"}\n`)
      const refused = await docket(["enqueue", "--from", badLine, "--database", url])
      expect(refused.code).toBe(2)
      expect(refused.stderr).toMatch(/line 1: .*onConflict|line 1: must be one of/)
    })
  })
}
