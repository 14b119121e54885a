/**
 * `docket group list` end to end, as a child process, on a SQLite file and on
 * a fresh PostgreSQL database: a kind's groups a page at a time (text and
 * JSON, the next page's cursor), and bad input refused (exit 2, one line).
 */
import { afterAll, describe, expect, it } from "vitest"
import { cliBackends, docket, lines } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const backends = cliBackends(cleanups)

describe.each(backends)("docket group list on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    it("pages a kind's groups; --json; bad input exits 2", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      for (const group of ["tenant:b", "tenant:a", "tenant:a"]) {
        const added = await docket(["enqueue", "sync", "{}", "--group", group, "--database", url])
        expect(added.code, added.stderr).toBe(0)
      }
      expect((await docket(["enqueue", "sync", "{}", "--database", url])).code).toBe(0)
      const first = await docket(["group", "list", "sync", "--limit", "1", "--database", url])
      expect(first.code, first.stderr).toBe(0)
      expect(lines(first.stdout)).toEqual([
        expect.stringMatching(/^group\s+due\s+scheduled\s+running\s+retrying\s+first item\s+held by a failure$/),
        expect.stringMatching(/^tenant:a\s+2\s+0\s+0\s+0\s+#2 due\s+-$/),
        `next page: docket group list sync --cursor "tenant:a"`
      ])
      const next = await docket(["group", "list", "sync", "--limit", "1", "--cursor", "tenant:a", "--json", "--database", url])
      expect(next.code, next.stderr).toBe(0)
      const page = JSON.parse(next.stdout) as { groups: Array<{ group: string; counts: Record<string, number> }>; cursor: string | null }
      expect(page.groups.map((g) => [g.group, g.counts.due])).toEqual([["tenant:b", 1]])
      expect(page.cursor).toBe("tenant:b")
      const none = await docket(["group", "list", "mail", "--database", url])
      expect(none.stdout.trim()).toBe("no groups of mail with unfinished items")
      for (const args of [["group", "list", "bad kind!"], ["group", "list", "sync", "--limit", "0"]]) {
        const refused = await docket([...args, "--database", url])
        expect(refused.code).toBe(2)
        expect(lines(refused.stderr).length).toBe(1)
      }
    })
  })
})
