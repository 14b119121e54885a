/**
 * Issue 16's Snooze, end to end through the command: a plain task file throws
 * Docket's `Snooze` (the item waits again, attempt not counted), its
 * `options.maxSnoozes` caps the snoozes (then dead with SnoozeLimit), and a
 * bad `options.maxSnoozes` is refused before the worker starts.
 */
import { afterAll, describe, expect, it } from "vitest"
import { docket, DOCKET_URL, lines, start, tempDir } from "../support/cli.js"

const cleanups: Array<() => void> = []
afterAll(() => {
  for (const c of cleanups.splice(0)) c()
})

describe("a task file's Snooze through the command", () => {
  it("a thrown Snooze puts the item back, attempt not counted; past options.maxSnoozes it is dead; a bad maxSnoozes is refused", async () => {
    const d = tempDir("docket-snooze-")
    cleanups.push(d.remove)
    d.write("package.json", JSON.stringify({ type: "module" }))
    d.write(
      "poll.mts",
      `import { Snooze } from ${JSON.stringify(DOCKET_URL)}
      export const options = { maxSnoozes: 2, maxAttempts: 1 }
      export default async (payload: { always?: boolean }, job: { snoozes: number }) => {
        if (payload.always || job.snoozes === 0) throw new Snooze({ delay: 0, reason: "not ready" })
      }\n`
    )
    const url = d.path("queue.db")
    for (const payload of ["{}", `{"always":true}`]) {
      const added = await docket(["enqueue", "poll", payload, "--database", url])
      expect(added.code, added.stderr).toBe(0)
    }
    const worker = start(["worker", "--tasks", d.dir, "--database", url, "--poll", "200ms", "--grace", "2s", "--log-items"])
    cleanups.push(() => worker.child.kill("SIGKILL"))
    for (
      const line of [
        /snooze poll #1 \(snooze 1; attempt not counted\) for 0 ms: Snooze: not ready/,
        /done poll #1/,
        /snooze poll #2 \(snooze 2; attempt not counted\)/,
        /dead poll #2 \(attempt 1\): SnoozeLimit: snoozed 2 times \(maxSnoozes 2\); the last: Snooze: not ready/
      ]
    ) await worker.waitFor(line, 15_000)
    worker.child.kill("SIGTERM")
    const exit = await worker.exited
    expect(exit.code, exit.stderr).toBe(0)
    expect(exit.stdout).toMatch(/docket worker stopped: done 1, retried 0, dead 1, given back 0, cancelled 0, snoozed 3/)
    const list = await docket(["dead", "list", "--json", "--database", url])
    expect(list.code, list.stderr).toBe(0)
    expect(JSON.parse(list.stdout)).toMatchObject([{ id: 2, attempts: 1, snoozes: 2 }])

    d.write("poll.mts", `export const options = { maxSnoozes: -1 }\nexport default async () => {}\n`)
    const refused = await docket(["worker", "--tasks", d.dir, "--database", url])
    expect(refused.code).not.toBe(0)
    expect(lines(refused.stderr).join("\n")).toMatch(
      /task file poll\.mts: options\.maxSnoozes must be an integer from 0 to 1000000 \(got -1\)/
    )
  }, 180_000)
})
