/**
 * `docket dashboard` as a child process (node bin/docket.mjs), on a SQLite
 * file and on a fresh PostgreSQL database: it listens on 127.0.0.1 (a free
 * port with --port 0), serves the pages under --base-path, takes the token
 * from DOCKET_DASHBOARD_TOKEN, never prints or shows the database password,
 * refuses bad usage with exit 2, and stops on SIGTERM with exit 0.
 */
import { afterAll, describe, expect, it } from "vitest"
import { loopbackHosts } from "../../src/cli/commands/dashboardServe.js"
import { cliBackends, docket, lines, start, tempDir } from "../support/cli.js"
import { statusWithHost } from "../support/dashboard.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const TOKEN = "cli-token-0123456789abcdef"

describe.each(cliBackends(cleanups))("docket dashboard on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    it("serves the pages, the API and /metrics on 127.0.0.1, actions with the token, until SIGTERM", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      expect((await docket(["enqueue", "mail.send", "{\"to\":\"ada@example.com\"}", "--database", url])).code).toBe(0)
      // On PostgreSQL a password the server does not check (trust) goes in the URL: it must never be shown.
      const withPassword = url.startsWith("postgres") ? url.replace("://root@", "://root:Pa55-never-shown@") : url
      const running = start(["dashboard", "--database", withPassword, "--port", "0", "--base-path", "/docket"], {
        env: { DOCKET_DASHBOARD_TOKEN: TOKEN }
      })
      cleanups.push(() => void running.child.kill("SIGKILL"))
      await running.waitFor(/listening on http:\/\/127\.0\.0\.1:\d+/)
      const root = `${/http:\/\/127\.0\.0\.1:\d+/.exec(running.stdout)![0]}/docket`
      expect(running.stdout).toContain("actions need the token")
      expect(running.stdout).not.toContain("Pa55-never-shown")
      for (const path of ["/", "/items", "/items/1", "/kinds", "/recurring", "/workers", "/login"]) {
        const response = await fetch(`${root}${path}`)
        expect(response.status, path).toBe(200)
        const body = await response.text()
        expect(body, path).not.toContain("Pa55-never-shown")
      }
      expect(await (await fetch(`${root}/items/1`)).text()).toContain("ada@example.com")
      expect(await (await fetch(`${root}/metrics`)).text()).toContain(`docket_items{kind="mail.send",state="waiting"} 1`)
      expect((await fetch(`${root}/api/kinds/mail.send/pause`, { method: "POST" })).status).toBe(401)
      const paused = await fetch(`${root}/api/kinds/mail.send/pause`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } })
      expect(paused.status).toBe(200)
      const kinds = await docket(["kind", "list", "--json", "--database", url])
      expect(JSON.parse(kinds.stdout)).toEqual([expect.objectContaining({ kind: "mail.send", paused: true })])
      running.child.kill("SIGTERM")
      const exit = await running.exited
      expect(exit.code, exit.stderr).toBe(0)
      expect(exit.stderr).not.toContain("Pa55-never-shown")
    })
  })
})

describe("docket dashboard's usage", () => {
  it("refuses a short token, a bad base path and a missing SQLite file with exit 2 and one line", { timeout: 180_000 }, async () => {
    const dir = tempDir()
    cleanups.push(dir.remove)
    const db = dir.path("queue.db")
    expect((await docket(["migrate", "--database", db])).code).toBe(0)
    const cases: Array<readonly [ReadonlyArray<string>, RegExp]> = [
      [["--token", "short"], /token must be 16 to 1024 characters/],
      [["--base-path", "docket/"], /basePath must be/],
      [["--port", "70000"], /--port must be from 0 to 65535/],
      [["--public-origin", "ops.example.com"], /publicOrigin must be a URL/]
    ]
    for (const [args, message] of cases) {
      const result = await docket(["dashboard", "--database", db, ...args])
      expect(result.code, args.join(" ")).toBe(2)
      expect(lines(result.stderr), args.join(" ")).toEqual([expect.stringMatching(message)])
    }
    const missing = await docket(["dashboard", "--database", dir.path("nope.db")])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/no queue at/)
  })

  it("bound to any loopback address (all of 127.0.0.0/8, ::1 however written) it answers only to loopback names and that address", {
    timeout: 180_000
  }, async () => {
    expect(loopbackHosts("127.0.0.2")).toContain("127.0.0.2")
    expect(loopbackHosts("127.1")).toContain("127.0.0.1")
    expect(loopbackHosts("LocalHost")).toContain("localhost")
    expect(loopbackHosts("0:0:0:0:0:0:0:1")).toContain("[::1]")
    for (const exposed of ["0.0.0.0", "::", "10.0.0.1", "example.com"]) expect(loopbackHosts(exposed), exposed).toBeUndefined()
    const dir = tempDir()
    cleanups.push(dir.remove)
    const db = dir.path("queue.db")
    expect((await docket(["migrate", "--database", db])).code).toBe(0)
    const running = start(["dashboard", "--database", db, "--host", "127.0.0.2", "--port", "0"])
    cleanups.push(() => void running.child.kill("SIGKILL"))
    await running.waitFor(/listening on http:\/\/127\.0\.0\.2:\d+\//)
    const port = Number(/127\.0\.0\.2:(\d+)/.exec(running.stdout)![1])
    const status = (host: string) => statusWithHost(port, "/items", host, "127.0.0.2")
    expect(await status(`127.0.0.2:${port}`)).toBe(200)
    expect(await status(`localhost:${port}`)).toBe(200)
    expect(await status(`rebound.evil.example:${port}`)).toBe(421)
    running.child.kill("SIGTERM")
    expect((await running.exited).code).toBe(0)
  })

  it("is read-only without a token, and says so", { timeout: 180_000 }, async () => {
    const dir = tempDir()
    cleanups.push(dir.remove)
    const db = dir.path("queue.db")
    expect((await docket(["migrate", "--database", db])).code).toBe(0)
    const running = start(["dashboard", "--database", db, "--port", "0"])
    cleanups.push(() => void running.child.kill("SIGKILL"))
    await running.waitFor(/listening on http:\/\/127\.0\.0\.1:\d+\/ over .*queue\.db \(read-only: no token\)/)
    const root = /http:\/\/127\.0\.0\.1:\d+/.exec(running.stdout)![0]
    expect((await fetch(`${root}/api/kinds/mail.send/pause`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } })).status)
      .toBe(403)
    running.child.kill("SIGINT")
    expect((await running.exited).code).toBe(0)
  })
})
