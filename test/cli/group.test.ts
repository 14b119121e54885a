/**
 * `docket group pause | resume` end to end, as a child process, on a SQLite
 * file and on a fresh PostgreSQL database: a paused group's items are not
 * claimed while the kind's other groups' are (claims made in this process
 * through the library, on the same queue), until it is resumed; bad input
 * refused (exit 2, one line naming the field, nothing written); a SQLite file
 * that does not exist is refused, not made.
 */
import { existsSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { cliBackends, docket, lines, openRepo } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const backends = cliBackends(cleanups)
const repoAt = openRepo(cleanups)

describe.each(backends)("docket group on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    it("pauses one group of a kind (the others go on) and resumes it", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      for (const g of ["a", "a", "b"]) {
        const r = await docket(["enqueue", "hook.send", JSON.stringify({ g }), "--group", g, "--database", url])
        expect(r.code, r.stderr).toBe(0)
      }
      const paused = await docket(["group", "pause", "hook.send", "a", "--database", url])
      expect(paused.code, paused.stderr).toBe(0)
      expect(paused.stdout).toMatch(/^paused group a of hook\.send: no worker starts its items/)
      const repo = repoAt(url)
      const claim = () => repo((r) => r.claim({ worker: "w", limit: 10, lease: "1 minute" }))
      expect((await claim()).map((c) => c.group)).toEqual(["b"])
      expect(await claim()).toEqual([])
      const resumed = await docket(["group", "resume", "hook.send", "a", "--database", url])
      expect([resumed.code, resumed.stdout.trim()]).toEqual([0, "resumed group a of hook.send"])
      expect((await claim()).map((c) => c.group)).toEqual(["a", "a"])
    })

    it("refuses bad input with exit 2 and one line naming the field, and writes nothing", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      if (backend.name === "sqlite") {
        const missing = await docket(["group", "pause", "k", "a", "--database", url])
        expect([missing.code, missing.stderr.trim()]).toEqual([2, expect.stringMatching(/no queue at .*docket migrate/)])
        expect(existsSync(url)).toBe(false)
      }
      expect((await docket(["migrate", "--database", url])).code).toBe(0)
      const refusals: Array<[ReadonlyArray<string>, RegExp]> = [
        [["pause", "k", ""], /group '' must not be empty/],
        [["resume", "k", "x".repeat(513)], /group 'x{40}\.\.\.' must be at most 512 characters/],
        [["pause", "bad kind!", "a"], /kind 'bad kind!' may hold only/],
        [["pause", "k"], /group/i]
      ]
      for (const [args, message] of refusals) {
        const r = await docket(["group", ...args, "--database", url])
        expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(2)
        expect(lines(r.stderr), args.join(" ")).toEqual([expect.stringMatching(message)])
      }
      const kinds = await docket(["kind", "list", "--json", "--database", url])
      expect(JSON.parse(kinds.stdout)).toEqual([])
    })
  })
})
