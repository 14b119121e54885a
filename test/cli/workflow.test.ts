/**
 * `docket workflow` end to end, as child processes, on a SQLite file and on a
 * fresh PostgreSQL database: a workflow process (test/fixtures/workflow-approve.ts)
 * starts approvals that suspend on a DurableDeferred; the command lists them
 * as suspended, shows one, completes its deferred by its token (the
 * execution then acts and completes), interrupts another (its compensation
 * runs); bad input (a garbage token, a token for no execution, unknown ids)
 * is refused and changes nothing. @effect/workflow is loaded by a workflow
 * command or the dashboard's first workflow page only, never by another
 * command, help, another page or /metrics.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { BIN, cliBackends, docket, lines, runNode, startNode, tempDir } from "../support/cli.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const backends = cliBackends(cleanups)

interface ExecutionJson {
  readonly executionId: string
  readonly workflow: string
  readonly state: string
  readonly runs: number
}

const page = async (url: string, ...args: Array<string>) => {
  const r = await docket(["workflow", "list", "--json", "--database", url, ...args])
  expect(r.code, r.stderr).toBe(0)
  return JSON.parse(r.stdout) as { executions: Array<ExecutionJson>; cursor: string | null }
}

const listed = async (url: string, ...args: Array<string>): Promise<Array<ExecutionJson>> => (await page(url, ...args)).executions

const stateOf = async (url: string, id: string) => (await listed(url)).find((e) => e.executionId === id)?.state

/** Polls until the execution is in `state` (the command's own list), or fails after 60 s. */
const waitForState = async (url: string, id: string, state: string) => {
  const deadline = performance.now() + 60_000
  for (;;) {
    const now = await stateOf(url, id)
    if (now === state) return
    if (performance.now() > deadline) throw new Error(`execution ${id} not ${state} within 60 s (it is ${now})`)
  }
}

/** Starts the workflow process; resolves with each tag's execution id and deferred token once printed. */
const startApprovals = async (url: string, tags: ReadonlyArray<string>) => {
  const proc = startNode(["--import", "tsx", "test/fixtures/workflow-approve.ts", url, ...tags])
  cleanups.push(() => void proc.child.kill("SIGKILL"))
  await proc.waitFor(new RegExp(`^execution ${tags[tags.length - 1]} `, "m"), 90_000)
  const executions = new Map<string, { id: string; token: string }>()
  for (const m of proc.stdout.matchAll(/^execution (\S+) (\S+) (\S+)$/gm)) executions.set(m[1], { id: m[2], token: m[3] })
  return { proc, executions }
}

describe.each(backends)("docket workflow on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    it("lists and shows suspended executions, completes a deferred by its token, interrupts one", {
      timeout: 180_000
    }, async () => {
      const url = await backend.fresh()
      const { executions, proc } = await startApprovals(url, ["yes", "no"])
      const yes = executions.get("yes")!
      const no = executions.get("no")!
      await waitForState(url, yes.id, "suspended")
      await waitForState(url, no.id, "suspended")

      const all = await listed(url, "--state", "suspended", "--name", "Approve")
      expect(all.map((e) => e.executionId).sort()).toEqual([yes.id, no.id].sort())
      expect(await listed(url, "--state", "complete")).toEqual([])
      expect(await listed(url, "--name", "Other")).toEqual([])
      // A page at a time: the cursor of a full page gives the next one; an empty page has none.
      const first = await page(url, "--limit", "1")
      const second = await page(url, "--limit", "1", "--cursor", first.cursor!)
      const third = await page(url, "--limit", "1", "--cursor", second.cursor!)
      expect([...first.executions, ...second.executions].map((e) => e.executionId).sort()).toEqual([yes.id, no.id].sort())
      expect(third).toEqual({ executions: [], cursor: null })
      const paged = await docket(["workflow", "list", "--limit", "1", "--database", url])
      expect(lines(paged.stdout).at(-1)).toBe(`more: docket workflow list --limit 1 --cursor ${first.cursor}`)
      const table = await docket(["workflow", "list", "--database", url])
      expect(lines(table.stdout)[0]).toMatch(/^id\s+workflow\s+state\s+runs\s+updated\s+parent$/)
      expect(table.stdout).toMatch(new RegExp(`^${yes.id}\\s+Approve\\s+suspended\\s+1\\s`, "m"))

      const shown = await docket(["workflow", "show", yes.id, "--json", "--database", url])
      expect(shown.code, shown.stderr).toBe(0)
      expect(JSON.parse(shown.stdout)).toMatchObject({
        executionId: yes.id,
        workflow: "Approve",
        state: "suspended",
        payload: { tag: "yes" },
        result: null,
        activities: [{ name: "ask", attempt: 1 }],
        deferreds: [],
        clocks: [],
        children: []
      })
      const text = await docket(["workflow", "show", yes.id, "--database", url])
      expect(text.stdout).toMatch(/^state\s+suspended$/m)
      expect(text.stdout).toMatch(/^activities \(1\):\n {2}ask {2}attempt 1 /m)

      // The approval, from this process, through the command: the execution acts and completes.
      const done = await docket(["workflow", "complete", yes.token, "--value", '"granted"', "--database", url])
      expect(done.code, done.stderr).toBe(0)
      expect(done.stdout).toMatch(new RegExp(`completed deferred approval of Approve execution ${yes.id}`))
      await proc.waitFor(/^acted yes granted$/m)
      await waitForState(url, yes.id, "complete")
      const after = JSON.parse((await docket(["workflow", "show", yes.id, "--json", "--database", url])).stdout)
      expect(after.result).toEqual({ _tag: "Complete", exit: { _tag: "Success", value: "granted" } })
      expect(after.activities.map((a: { name: string }) => a.name)).toEqual(["ask", "act"])
      expect(after.deferreds).toMatchObject([{ name: "approval", exit: { _tag: "Success", value: "granted" } }])

      // The other is interrupted: its compensation runs, it completes interrupted, it never acts.
      const resumedRunning = await docket(["workflow", "resume", yes.id, "--database", url])
      expect([resumedRunning.code, resumedRunning.stderr.trim()]).toEqual([1, `docket: workflow execution ${yes.id} is not suspended: nothing to resume`])
      const stopped = await docket(["workflow", "interrupt", no.id, "--database", url])
      expect(stopped.code, stopped.stderr).toBe(0)
      await proc.waitFor(/^compensated no$/m)
      await waitForState(url, no.id, "complete")
      expect(proc.stdout).not.toMatch(/^acted no/m)
      expect(proc.stdout).not.toMatch(/^compensated yes/m)
      const again = await docket(["workflow", "interrupt", no.id, "--database", url])
      expect([again.code, again.stderr.trim()]).toEqual([1, `docket: workflow execution ${no.id} is complete: nothing to interrupt`])
    })

    it("refuses bad input with one line on stderr and changes nothing", { timeout: 180_000 }, async () => {
      const url = await backend.fresh()
      const { executions } = await startApprovals(url, ["wait"])
      const wait = executions.get("wait")!
      await waitForState(url, wait.id, "suspended")
      const before = JSON.parse((await docket(["workflow", "show", wait.id, "--json", "--database", url])).stdout)
      // A token of the same shape for an execution that does not exist.
      const orphan = Buffer.from(JSON.stringify(["Approve", "no-such-execution", "approval"])).toString("base64url")
      const refusals: Array<[ReadonlyArray<string>, number, RegExp]> = [
        [["complete", "garbage"], 2, /^docket: invalid token: /],
        [["complete", orphan, "--value", "1"], 2, /^docket: token: no workflow execution no-such-execution \(of Approve\)/],
        [["complete", wait.token, "--value", "{nope"], 2, /^docket: --value: '\{nope' is not JSON$/],
        [["complete", wait.token, "--value", "1", "--fail", "2"], 2, /^docket: give --value or --fail, not both$/],
        [["show", "no-such-execution"], 1, /^docket: no workflow execution no-such-execution$/],
        [["interrupt", "no-such-execution"], 1, /^docket: no workflow execution no-such-execution$/],
        [["resume", "no-such-execution"], 1, /^docket: no workflow execution no-such-execution$/],
        [["list", "--state", "asleep"], 2, /^docket: --state: 'asleep' is not one of running, suspended, complete$/],
        [["list", "--limit", "0"], 2, /^docket: --limit must be from 1 to 1000/],
        [["list", "--cursor", "soon"], 2, /^docket: --cursor: 'soon' is not a cursor of this list$/]
      ]
      for (const [args, code, message] of refusals) {
        const r = await docket(["workflow", ...args, "--database", url])
        expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(code)
        expect(lines(r.stderr), args.join(" ")).toEqual([expect.stringMatching(message)])
        expect(r.stdout, args.join(" ")).toBe("")
      }
      const all = await listed(url)
      expect(all.map((e) => [e.executionId, e.state])).toEqual([[wait.id, "suspended"]])
      const after = JSON.parse((await docket(["workflow", "show", wait.id, "--json", "--database", url])).stdout)
      expect(after).toEqual(before)
    })
  })
})

describe("docket workflow's loading", () => {
  it("loads @effect/workflow only when a workflow command or page is used, not for another command, help or page", async () => {
    const d = tempDir("docket-wf-trace-")
    cleanups.push(d.remove)
    // A load hook that notes every module of @effect/workflow the process imports.
    d.write(
      "trace-hooks.mjs",
      `import { appendFileSync } from "node:fs"\n` +
        `export async function load(url, context, next) {\n` +
        `  if (url.includes("/@effect/workflow/")) appendFileSync(process.env.WF_TRACE, url + "\\n")\n` +
        `  return next(url, context)\n}\n`
    )
    const hook = d.write("trace.mjs", `import { register } from "node:module"\nregister("./trace-hooks.mjs", import.meta.url)\n`)
    const trace = d.path("trace.txt")
    const db = d.path("queue.db")
    const loaded = async (args: ReadonlyArray<string>) => {
      writeFileSync(trace, "")
      const r = await runNode(["--import", hook, BIN, ...args], { env: { WF_TRACE: trace } })
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0)
      return readFileSync(trace, "utf8")
    }
    expect(await loaded(["migrate", "--database", db])).toBe("")
    expect(await loaded(["kind", "list", "--database", db])).toBe("")
    expect(await loaded(["workflow", "list", "--help"])).toBe("")
    expect(await loaded(["workflow"])).toBe("")
    // The hook sees it when a workflow command runs (so the empty traces above mean something).
    expect(await loaded(["workflow", "list", "--database", db])).toMatch(/@effect\/workflow\/dist\/esm\/DurableDeferred\.js/)
    // The dashboard: its pages and /metrics (the workflows' counts among them) without it; the first workflow page loads it.
    writeFileSync(trace, "")
    const dashboard = startNode(["--import", hook, BIN, "dashboard", "--port", "0", "--database", db], { env: { WF_TRACE: trace } })
    cleanups.push(() => void dashboard.child.kill("SIGKILL"))
    await dashboard.waitFor(/listening on (http:\/\/\S+)\//)
    const root = /listening on (http:\/\/\S+?)\/ /.exec(dashboard.stdout)![1]
    for (const path of ["/", "/kinds", "/metrics"]) expect((await fetch(`${root}${path}`)).status, path).toBe(200)
    expect(await (await fetch(`${root}/metrics`)).text()).toContain("# TYPE docket_workflow_executions gauge")
    expect(readFileSync(trace, "utf8")).toBe("")
    expect((await fetch(`${root}/workflows`)).status).toBe(200)
    expect(readFileSync(trace, "utf8")).toMatch(/@effect\/workflow\//)
    dashboard.child.kill("SIGTERM")
    expect((await dashboard.exited).code).toBe(0)
  })
})
