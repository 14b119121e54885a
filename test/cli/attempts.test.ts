/**
 * Issue 15's report, end to end through the command: a task file's
 * `options.maxAttempts` applies to items enqueued with `docket enqueue`
 * (without `--max-attempts`), and `--max-attempts` still wins.
 */
import { afterAll, describe, expect, it } from "vitest"
import { docket, lines, start, tempDir } from "../support/cli.js"

const cleanups: Array<() => void> = []
afterAll(() => {
  for (const c of cleanups.splice(0)) c()
})

describe("a task file's maxAttempts through the command", () => {
  it("applies to items enqueued without --max-attempts; --max-attempts wins; dead list shows the attempts", async () => {
    const d = tempDir("docket-attempts-")
    cleanups.push(d.remove)
    d.write("package.json", JSON.stringify({ type: "module" }))
    d.write(
      "capped.mjs",
      `export const options = { maxAttempts: 3, backoff: "20ms" }
      export default async () => { throw new Error("always fails") }\n`
    )
    const url = d.path("queue.db")
    const plain = await docket(["enqueue", "capped", "{}", "--database", url])
    expect(plain.code, plain.stderr).toBe(0)
    const own = await docket(["enqueue", "capped", "{}", "--max-attempts", "2", "--database", url])
    expect(own.code, own.stderr).toBe(0)
    const worker = start(["worker", "--tasks", d.dir, "--database", url, "--poll", "200ms", "--grace", "2s"])
    cleanups.push(() => worker.child.kill("SIGKILL"))
    for (
      const line of [
        /retry capped #1 \(attempt 1 of 3\)/,
        /retry capped #1 \(attempt 2 of 3\)/,
        /dead capped #1 \(attempt 3\)/,
        /retry capped #2 \(attempt 1 of 2\)/,
        /dead capped #2 \(attempt 2\)/
      ]
    ) await worker.waitFor(line, 15_000)
    worker.child.kill("SIGTERM")
    const exit = await worker.exited
    expect(exit.code, exit.stderr).toBe(0)
    expect(exit.stdout).not.toMatch(/of 8/)
    const list = await docket(["dead", "list", "--database", url])
    expect(list.code, list.stderr).toBe(0)
    expect(lines(list.stdout).slice(1).map((l) => l.split("\t").slice(0, 3))).toEqual([
      ["1", "capped", "3"],
      ["2", "capped", "2/2"]
    ])
  }, 180_000)
})
