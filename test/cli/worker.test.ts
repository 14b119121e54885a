/**
 * What `docket worker` prints when its stdout is not a terminal (issue 19), a
 * real child process on a real SQLite file: by default no line per routine
 * item ("started", "done") but the failures (retry, dead) and a periodic
 * summary; --log-items adds the item lines; --log-format json writes one
 * JSON object per line (the started and stopped lines too). Bad values of the
 * new flags are refused in test/cli/usage.test.ts.
 */
import { afterAll, describe, expect, it } from "vitest"
import { docket, lines, start, tempDir } from "../support/cli.js"

const cleanups: Array<() => void> = []
afterAll(() => {
  for (const c of cleanups.splice(0)) c()
})

/** A folder with a task that succeeds and one that fails (one attempt: dead at once), and a queue with 3 + 1 items. */
const setup = async () => {
  const d = tempDir("docket-output-")
  cleanups.push(d.remove)
  d.write("package.json", JSON.stringify({ type: "module" }))
  d.write("ok.mjs", "export default async () => {}\n")
  d.write("bad.mjs", "export default async () => { throw new Error(\"it broke\") }\n")
  const url = d.path("queue.db")
  for (const [kind, extra] of [["ok", []], ["ok", []], ["ok", []], ["bad", ["--max-attempts", "2"]]] as const) {
    const r = await docket(["enqueue", kind, "{}", "--database", url, ...extra])
    expect(r.code, r.stderr).toBe(0)
  }
  return { d, url }
}

describe("docket worker's output out of a terminal", () => {
  it("by default: the failures and a summary, no per-item lines", async () => {
    const { d, url } = await setup()
    const worker = start(["worker", "--tasks", d.dir, "--database", url, "--poll", "200ms", "--summary", "1s"])
    cleanups.push(() => worker.child.kill("SIGKILL"))
    await worker.waitFor(/retry bad #4 \(attempt 1 of 2\) in .*: Error: it broke/, 15_000)
    // A summary line per second while something happens; the one after the items ran counts them all.
    await worker.waitFor(/summary over \d+\.\d s: done \d \(\d+(\.\d)?\/s\), retried \d, dead 0, running \d; since start: done 3, retried 1, dead 0$/m, 15_000)
    worker.child.kill("SIGTERM")
    const exit = await worker.exited
    expect(exit.code, exit.stderr).toBe(0)
    expect(exit.stdout).toMatch(/^docket worker \S+ started on /m)
    expect(exit.stdout).toMatch(/docket worker stopped: done 3, retried 1, dead 0/)
    expect(exit.stdout).not.toMatch(/ (done|started) ok #/)
  })

  it("--log-items adds a line per started and done item", async () => {
    const { d, url } = await setup()
    const worker = start(["worker", "--tasks", d.dir, "--database", url, "--summary", "off", "--log-items"])
    cleanups.push(() => worker.child.kill("SIGKILL"))
    for (const id of [1, 2, 3]) await worker.waitFor(new RegExp(`done ok #${id} in \\d+ ms`), 15_000)
    await worker.waitFor(/retry bad #4 /, 15_000)
    worker.child.kill("SIGTERM")
    const exit = await worker.exited
    expect(exit.code, exit.stderr).toBe(0)
    expect(exit.stdout).toMatch(/ started ok #1 \(attempt 1\)/)
    expect(exit.stdout).not.toMatch(/summary over/)
  })

  it("--log-format json: one object per line with its fields, the started and stopped lines too", async () => {
    const { d, url } = await setup()
    const worker = start(["worker", "--tasks", d.dir, "--database", url, "--summary", "1s", "--log-format", "json", "--log-items"])
    cleanups.push(() => worker.child.kill("SIGKILL"))
    await worker.waitFor(/"event":"summary".*"totalDone":3,"totalRetried":1/, 15_000)
    worker.child.kill("SIGTERM")
    const exit = await worker.exited
    expect(exit.code, exit.stderr).toBe(0)
    const records = lines(exit.stdout).map((line) => JSON.parse(line) as Record<string, unknown>)
    for (const r of records) {
      expect(typeof r.time).toBe("string")
      expect(Number.isNaN(Date.parse(r.time as string))).toBe(false)
      expect(["info", "warn", "error"]).toContain(r.level)
      expect(typeof r.message).toBe("string")
    }
    const events = records.map((r) => r.event)
    expect(events[0]).toBe("worker started")
    expect(events.slice(-2)).toEqual(["worker stopping", "worker stopped"])
    const done = records.filter((r) => r.event === "done")
    expect(done.map((r) => r.id).sort()).toEqual([1, 2, 3])
    expect(done[0]).toMatchObject({ level: "info", kind: "ok", attempt: 1 })
    expect(typeof done[0].durationMs).toBe("number")
    expect(records.find((r) => r.event === "retry")).toMatchObject({
      level: "warn",
      kind: "bad",
      id: 4,
      attempt: 1,
      maxAttempts: 2,
      error: "Error: it broke"
    })
    expect(records.findLast((r) => r.event === "summary")).toMatchObject({ dead: 0, running: 0, totalDone: 3, totalRetried: 1 })
    expect(records.at(-1)).toMatchObject({ done: 3, retried: 1, dead: 0 })
    // Warnings on stderr are JSON too.
    for (const line of lines(exit.stderr)) expect(() => JSON.parse(line), line).not.toThrow()
  })
})
