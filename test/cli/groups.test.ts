/**
 * Groups across real processes (issue 36): three `docket worker` processes on
 * one queue, a task file declaring `perGroup: { concurrency: 1, ordered: true }`,
 * 20 groups of 10 items enqueued interleaved by `docket enqueue --from` (each
 * with a priority that would reorder them if priority counted inside a
 * group). From the handlers' own records (one file every process appends to,
 * a start line before the work and an end line after it, so the file's order
 * is the order things happened): per group, runs never overlap and start in
 * enqueue order, each item once. On SQLite and PostgreSQL. Also the command's
 * own refusals of a bad group and a bad perGroup.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { cliBackends, docket, type Running, start, tempDir, waitUntil } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0)) await c()
})

const GROUPS = 20
const PER_GROUP = 10

interface Record {
  readonly e: "s" | "e"
  readonly g: string
  readonly n: number
  readonly pid: number
}

const records = (file: string): Array<Record> =>
  readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Record)

describe.each(cliBackends(cleanups))("groups across worker processes on $name", (backend) => {
  it.skipIf(backend.skip)("3 workers, 20 groups: per group one run at a time, in enqueue order, each item once", {
    timeout: 240_000
  }, async () => {
    const url = await backend.fresh()
    const d = tempDir("docket-groups-")
    cleanups.push(d.remove)
    const log = d.path("runs.ndjson")
    writeFileSync(log, "")
    d.write("package.json", JSON.stringify({ type: "module" }))
    const tasks = d.path("tasks")
    mkdirSync(tasks)
    writeFileSync(
      d.path("tasks", "seq.mjs"),
      `import { appendFileSync } from "node:fs"
export const options = { perGroup: { concurrency: 1, ordered: true }, concurrency: 4 }
export default async (payload) => {
  appendFileSync(${JSON.stringify(log)}, JSON.stringify({ e: "s", g: payload.g, n: payload.n, pid: process.pid }) + "\\n")
  await new Promise((resolve) => setTimeout(resolve, 1 + ((payload.n * 7 + payload.g.length) % 9)))
  appendFileSync(${JSON.stringify(log)}, JSON.stringify({ e: "e", g: payload.g, n: payload.n, pid: process.pid }) + "\\n")
}
`
    )
    const migrated = await docket(["migrate", "--database", url])
    expect(migrated.code, migrated.stderr).toBe(0)
    // Interleaved: the n-th item of every group, then the (n+1)-th; priorities that would reorder a group.
    const lines: Array<string> = []
    for (let n = 0; n < PER_GROUP; n++) {
      for (let g = 0; g < GROUPS; g++) {
        lines.push(JSON.stringify({ kind: "seq", payload: { g: `customer:${g}`, n }, group: `customer:${g}`, priority: (n * 3) % 7 }))
      }
    }
    const bulk = d.write("items.ndjson", lines.join("\n") + "\n")

    const workers: Array<Running> = []
    for (let i = 0; i < 3; i++) {
      const w = start(["worker", "--tasks", tasks, "--database", url, "--poll", "200ms", "--summary", "off"])
      cleanups.push(() => {
        w.child.kill("SIGKILL")
      })
      workers.push(w)
    }
    for (const w of workers) await w.waitFor(/^docket worker \S+ started on /m)
    // Enqueued while the workers run, so the three compete for every group from the start.
    const enqueued = await docket(["enqueue", "--from", bulk, "--database", url])
    expect(enqueued.code, enqueued.stderr).toBe(0)

    await waitUntil("every item's end record", () => records(log).filter((r) => r.e === "e").length >= GROUPS * PER_GROUP, 180_000)
    for (const w of workers) w.child.kill("SIGTERM")
    for (const w of workers) expect((await w.exited).code, w.stderr).toBe(0)

    const all = records(log)
    expect(all.length).toBe(2 * GROUPS * PER_GROUP)
    for (let g = 0; g < GROUPS; g++) {
      const mine = all.filter((r) => r.g === `customer:${g}`).map((r) => `${r.e}${r.n}`)
      // Start n, end n, start n+1, ...: no overlap, enqueue order, each once.
      expect(mine).toEqual(Array.from({ length: PER_GROUP }, (_, n) => [`s${n}`, `e${n}`]).flat())
    }
    // The three processes all ran items (a group's items move between them).
    expect(new Set(all.map((r) => r.pid)).size).toBe(3)
  })

  it.skipIf(backend.skip)("a bad group or perGroup is a usage error (exit 2), nothing written", { timeout: 120_000 }, async () => {
    const url = await backend.fresh()
    const d = tempDir("docket-groups-bad-")
    cleanups.push(d.remove)
    expect((await docket(["migrate", "--database", url])).code).toBe(0)
    const empty = await docket(["enqueue", "seq", "{}", "--group", "", "--database", url])
    expect(empty.code).toBe(2)
    expect(empty.stderr).toMatch(/group/)
    const long = await docket(["enqueue", "seq", "{}", "--group", "x".repeat(513), "--database", url])
    expect(long.code).toBe(2)
    const bulk = d.write("bad.ndjson", `{"kind":"seq","payload":1,"group":"a"}\n{"kind":"seq","payload":2,"group":""}\n`)
    const fromFile = await docket(["enqueue", "--from", bulk, "--database", url])
    expect(fromFile.code).toBe(2)
    expect(fromFile.stderr).toMatch(/line 2: .*group/)
    const stats = await docket(["stats", "--json", "--database", url])
    expect(JSON.parse(stats.stdout).due).toBe(0)

    d.write("package.json", JSON.stringify({ type: "module" }))
    d.write("seq.mjs", `export const options = { perGroup: { concurrency: 0 } }\nexport default async () => {}\n`)
    const worker = await docket(["worker", "--tasks", d.dir, "--database", url])
    expect(worker.code).toBe(2)
    expect(worker.stderr).toMatch(/perGroup/)
  })
})
