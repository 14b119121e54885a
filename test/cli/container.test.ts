/**
 * `docket worker` in a 128 MiB container (issue 34): the compiled command
 * drains W2's load (20,000 no-op items, concurrency 10, history kept as by
 * default) inside a real memory cgroup of 128 MiB with no swap, on a SQLite
 * file and on PostgreSQL, and is not killed: every item is done, the kernel's
 * OOM killer killed nothing in the group, and the worker exits 0 on SIGTERM.
 * The group's peak charge is printed.
 *
 * The group is made on whichever cgroup hierarchy holds the memory controller
 * (test/support/cgroup.ts). Where none can be made (not Linux, not root, no
 * memory controller delegated) the test is skipped with the reason:
 * docs/operations.md ("A 128 MiB container") says how to check a deployment
 * by hand then.
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { makeMemoryCgroup } from "../support/cgroup.js"
import { BIN, cliBackends, docket, openRepo, tempDir, waitUntil } from "../support/cli.js"

const ITEMS = 20_000
const LIMIT = 128 * 1024 * 1024

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})
const repoAt = openRepo(cleanups)

const probe = makeMemoryCgroup(`docket-probe-${process.pid}`, LIMIT)
if (!("why" in probe)) probe.remove()
const why = "why" in probe ? probe.why : undefined
if (why !== undefined) console.warn(`the 128 MiB container test is skipped: ${why}`)

describe.each(cliBackends(cleanups))("docket worker in a 128 MiB cgroup on $name", (backend) => {
  it.skipIf(backend.skip || why !== undefined)("drains 20,000 items and is not killed", async () => {
    const url = await backend.fresh()
    const d = tempDir("docket-container-")
    cleanups.push(d.remove)
    d.write("noop.mjs", "export default async () => {}\n")
    const file = d.write("items.ndjson", `{"kind":"noop","payload":{}}\n`.repeat(ITEMS))
    const added = await docket(["enqueue", "--from", file, "--database", url], { timeoutMs: 120_000 })
    expect(added.code, added.stderr).toBe(0)

    const group = makeMemoryCgroup(`docket-worker-${process.pid}-${backend.name}`, LIMIT)
    if ("why" in group) throw new Error(group.why)
    const worker = spawn("sh", group.wrap([process.execPath, BIN, "worker", "--tasks", d.dir, "--database", url, "--concurrency", "10"]), {
      stdio: ["ignore", "ignore", "pipe"]
    })
    let stderr = ""
    worker.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s))
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      worker.on("close", (code, signal) => resolve({ code, signal }))
    )
    let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined
    void exited.then((e) => (ended = e))
    cleanups.push(async () => {
      if (ended === undefined) worker.kill("SIGKILL")
      await exited
      group.remove()
    })

    const repo = repoAt(url)
    await waitUntil(`${ITEMS} items done (or the worker's end)`, async () => {
      if (ended !== undefined) return true
      const s = await repo((r) => r.stats)
      return s.done === ITEMS
    }, 240_000, 250)
    expect(ended, `the worker ended early (OOM kills: ${group.oomKills()})\n${stderr}`).toBeUndefined()
    // The process's own peak (VmHWM) beside the group's: the group is charged
    // only the file pages it was first to read (node's binary and libraries
    // are mostly in the page cache already, charged to whoever read them first).
    const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${worker.pid}/status`, "utf8"))?.[1]
    worker.kill("SIGTERM")
    const end = await exited
    console.log(
      `128 MiB cgroup v${group.version}, ${backend.name}: the group's peak charge ${((group.peak() ?? NaN) / 2 ** 20).toFixed(1)} MiB, ` +
        `the worker's peak RSS ${(Number(hwm) / 1024).toFixed(1)} MiB`
    )
    expect(group.oomKills()).toBe(0)
    expect(end, stderr).toEqual({ code: 0, signal: null })
    expect(await repo((r) => r.stats)).toMatchObject({ done: ITEMS, due: 0, running: 0, dead: 0 })
  }, 300_000)
})
