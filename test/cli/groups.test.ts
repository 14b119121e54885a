/**
 * Groups across real processes (issue 36): three `docket worker` processes on
 * one queue, a task file declaring `perGroup: { concurrency: 1, ordered: true }`,
 * 20 groups of 10 items enqueued interleaved by `docket enqueue --from` (each
 * with a priority that would reorder them if priority counted inside a
 * group). From the handlers' own records (one file every process appends to,
 * a start line before the work and an end line after it, so the file's order
 * is the order things happened): per group, runs never overlap and start in
 * enqueue order, each item once. On SQLite and PostgreSQL. Also the command's
 * own refusals of a bad group and a bad perGroup. Again with one worker
 * SIGKILLed in the middle of a run: its lease holds the group until it ends,
 * then the same item runs again before the next.
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

// One group's records, in the file's order. Starts never go back in
// enqueue order; an item starts only once the one before it has ended; no
// run starts while another is open, unless the open one was `victim`'s (the
// process SIGKILLed: its run never ends). An item may start again after its
// own start (its run was killed) or its own end (killed before its outcome
// was written: at least once). Returns how many starts were such reruns.
const checkGroup = (events: ReadonlyArray<Record>, victim?: number): number => {
  let last = -1
  let open: Record | undefined
  let reruns = 0
  const ended = new Set<number>()
  for (const ev of events) {
    if (ev.e === "s") {
      expect(ev.n).toBeGreaterThanOrEqual(last)
      if (ev.n > 0) expect(ended.has(ev.n - 1), `item ${ev.n} started before ${ev.n - 1} ended`).toBe(true)
      if (open !== undefined) expect(open.pid, `item ${ev.n} started while ${open.n} ran`).toBe(victim)
      if (ev.n === last) reruns++
      last = ev.n
      open = ev
    } else {
      expect([open?.n, open?.pid]).toEqual([ev.n, ev.pid])
      open = undefined
      ended.add(ev.n)
    }
  }
  expect([ended.size, open]).toEqual([PER_GROUP, undefined])
  return reruns
}

interface Setup {
  readonly url: string
  readonly log: string
  readonly tasks: string
  readonly bulk: string
}

const setup = async (url: string): Promise<Setup> => {
  const d = tempDir("docket-groups-")
  cleanups.push(d.remove)
  const log = d.path("runs.ndjson")
  writeFileSync(log, "")
  d.write("package.json", JSON.stringify({ type: "module" }))
  const tasks = d.path("tasks")
  mkdirSync(tasks)
  // Runs of 60-100 ms: long enough that a kill lands inside one.
  writeFileSync(
    d.path("tasks", "seq.mjs"),
    `import { appendFileSync } from "node:fs"
export const options = { perGroup: { concurrency: 1, ordered: true }, concurrency: 4 }
export default async (payload) => {
  appendFileSync(${JSON.stringify(log)}, JSON.stringify({ e: "s", g: payload.g, n: payload.n, pid: process.pid }) + "\\n")
  await new Promise((resolve) => setTimeout(resolve, 60 + ((payload.n * 7 + payload.g.length) % 41)))
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
  return { url, log, tasks, bulk: d.write("items.ndjson", lines.join("\n") + "\n") }
}

const worker = (s: Setup) => {
  const w = start(["worker", "--tasks", s.tasks, "--database", s.url, "--poll", "200ms", "--summary", "off", "--lease", "2s"])
  cleanups.push(() => {
    w.child.kill("SIGKILL")
  })
  return w
}

// Every item's end, counted once per item: a run killed after its end record
// but before its outcome was written runs again and ends again, so counting
// end records stopped the wait (and the workers) with an item not yet run.
const allEnded = (s: Setup) =>
  waitUntil("every item's end record", () =>
    new Set(records(s.log).filter((r) => r.e === "e").map((r) => `${r.g}#${r.n}`)).size >= GROUPS * PER_GROUP, 180_000)

describe.each(cliBackends(cleanups))("groups across worker processes on $name", (backend) => {
  it.skipIf(backend.skip)("3 workers, 20 groups: per group one run at a time, in enqueue order, each item once", {
    timeout: 240_000
  }, async () => {
    const s = await setup(await backend.fresh())
    const workers = [worker(s), worker(s), worker(s)]
    for (const w of workers) await w.waitFor(/^docket worker \S+ started on /m)
    // Enqueued while the workers run, so the three compete for every group from the start.
    const enqueued = await docket(["enqueue", "--from", s.bulk, "--database", s.url])
    expect(enqueued.code, enqueued.stderr).toBe(0)
    await allEnded(s)
    for (const w of workers) w.child.kill("SIGTERM")
    for (const w of workers) expect((await w.exited).code, w.stderr).toBe(0)

    const all = records(s.log)
    expect(all.length).toBe(2 * GROUPS * PER_GROUP)
    for (let g = 0; g < GROUPS; g++) expect(checkGroup(all.filter((r) => r.g === `customer:${g}`))).toBe(0)
    // The three processes all ran items (a group's items move between them).
    expect(new Set(all.map((r) => r.pid)).size).toBe(3)
  })

  it.skipIf(backend.skip)("a worker SIGKILLed mid-run: its lease holds the group until it ends, then the same item runs before the next", {
    timeout: 240_000
  }, async () => {
    const s = await setup(await backend.fresh())
    const workers = [worker(s), worker(s), worker(s)]
    for (const w of workers) await w.waitFor(/^docket worker \S+ started on /m)
    const enqueued = await docket(["enqueue", "--from", s.bulk, "--database", s.url])
    expect(enqueued.code, enqueued.stderr).toBe(0)
    // Killed while one of its runs is open (a start of its own without an end yet).
    const victim = workers[0]
    const openRun = () => {
      const open = new Set<string>()
      for (const r of records(s.log)) {
        const id = `${r.g}#${r.n}`
        if (r.e === "s" && r.pid === victim.child.pid) open.add(id)
        else if (r.e === "e") open.delete(id)
      }
      return open.size > 0
    }
    await waitUntil("a run of the victim in progress", () => records(s.log).length > 60 && openRun(), 120_000, 5)
    victim.child.kill("SIGKILL")
    await victim.exited
    const replacement = worker(s)
    await replacement.waitFor(/^docket worker \S+ started on /m)
    await allEnded(s)
    for (const w of [workers[1], workers[2], replacement]) w.child.kill("SIGTERM")
    for (const w of [workers[1], workers[2], replacement]) expect((await w.exited).code, w.stderr).toBe(0)

    const all = records(s.log)
    let reruns = 0
    for (let g = 0; g < GROUPS; g++) reruns += checkGroup(all.filter((r) => r.g === `customer:${g}`), victim.child.pid)
    // The run the kill cut (at least that one) ran again.
    expect(reruns).toBeGreaterThanOrEqual(1)
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
