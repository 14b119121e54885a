import { afterAll, describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { runtimeSuite } from "./suite.js"
import { freshDir, sqliteBackend } from "../../support/db.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())
describe("runtime on SQLite", () => {
  runtimeSuite(backend)

  it("a SQLite application never loads the PostgreSQL driver", () => {
    const { dir, remove } = freshDir()
    try {
      const out = execFileSync(process.execPath, ["--import", "tsx", "test/fixtures/sqlite-only.ts", join(dir, "q.db")], {
        encoding: "utf8",
        timeout: 30_000
      })
      expect(out).toBe("ran; pg modules: []\n")
    } finally {
      remove()
    }
  }, 40_000)
})
