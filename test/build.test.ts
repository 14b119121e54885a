/**
 * The bundled command (npm run build -> dist/docket.mjs) is what production
 * workers and the benchmark run: it must build and work without tsx.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { freshDir } from "./support/db.js"

describe("the bundled command", () => {
  it("builds, migrates, enqueues and runs TypeScript task files", () => {
    execFileSync(process.execPath, ["scripts/build.mjs"], { stdio: "pipe" })
    const { dir, remove } = freshDir()
    try {
      const db = join(dir, "q.db")
      const run = (...args: Array<string>) =>
        execFileSync(process.execPath, ["dist/docket.mjs", ...args, "--database", db], { encoding: "utf8", timeout: 30_000 })
      expect(run("migrate")).toContain("applied migrations 1, 2, 3, 4, 5")
      expect(run("enqueue", "greet", '{"name":"Ada"}').trim()).toBe("1")
      // A worker over the example tasks (a .ts file among them) until the item is done.
      const out = execFileSync(
        process.execPath,
        ["-e", `
          const { spawn } = require("node:child_process")
          const child = spawn(process.execPath, ["dist/docket.mjs", "worker", "--tasks", "examples/tasks", "--database", ${JSON.stringify(db)}], { stdio: ["ignore", "pipe", "inherit"] })
          let text = ""
          let sent = false
          child.stdout.on("data", (d) => { text += d; if (!sent && /done greet #1/.test(text)) { sent = true; child.kill("SIGTERM") } })
          child.on("exit", (code) => { process.stdout.write(text + "exit " + code); })
          setTimeout(() => child.kill("SIGKILL"), 25000).unref()
        `],
        { encoding: "utf8", timeout: 30_000 }
      )
      expect(out).toMatch(/done greet #1/)
      expect(out).toMatch(/exit 0$/)
      expect(JSON.parse(run("stats", "--json"))).toMatchObject({ due: 0, scheduled: 0, running: 0, dead: 0 })
    } finally {
      remove()
    }
  })
})
