/**
 * The dashboard's workflow pages, API, actions and metrics over real HTTP,
 * on a SQLite file and on a fresh PostgreSQL database. Executions are
 * written straight into the engine's tables (no workflow runs here), so what
 * an action does is read back exactly: a resume or an interrupt wakes the
 * execution (running, a run's item waiting), an interrupt stores its signal;
 * refused ones (no token, no CSRF token, cross-site, GET, the wrong state,
 * an unknown id) change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cliBackends } from "../support/cli.js"
import { CSP, execDb, get, parseMetrics, postForm, postJson, serve, type Served } from "../support/dashboard.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const TOKEN = "workflows-token-0123456789abcdef"
const HOSTILE = "<script>alert(1)</script>"

interface Row {
  readonly id: string
  readonly workflow: string
  readonly state: "running" | "suspended" | "complete"
  readonly ageMs: number
  readonly parent?: string
  readonly result?: unknown
}

const ROWS: ReadonlyArray<Row> = [
  { id: "wait-old", workflow: "Approve", state: "suspended", ageMs: 600_000 },
  { id: "wait-new", workflow: "Approve", state: "suspended", ageMs: 30_000 },
  { id: "run-1", workflow: "Steps", state: "running", ageMs: 1_000 },
  { id: "done-1", workflow: "Steps", state: "complete", ageMs: 5_000, parent: "run-1", result: { _tag: "Complete", exit: { _tag: "Success", value: "ABC" } } }
]

const insert = async (url: string, r: Row) => {
  const at = Date.now() - r.ageMs
  const params = [
    r.id, r.workflow, JSON.stringify({ tag: r.id === "wait-old" ? HOSTILE : r.id }), r.state,
    r.result === undefined ? null : JSON.stringify(r.result), r.parent === undefined ? null : "Steps", r.parent ?? null,
    at, at, r.state === "complete" ? at : null
  ]
  await execDb(
    url,
    `INSERT INTO docket_workflow_executions (execution_id, workflow, payload, state, result, parent_workflow, parent_execution,
       runs, created_at, updated_at, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`,
    `INSERT INTO docket_workflow_executions (execution_id, workflow, payload, state, result, parent_workflow, parent_execution,
       runs, created_at, updated_at, completed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10)`,
    params
  )
}

describe.each(cliBackends(cleanups))("the dashboard's workflows on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    let served: Served
    let url: string
    let session: { cookie: string; csrf: string }
    beforeAll(async () => {
      url = await backend.fresh()
      served = await serve(url, { token: TOKEN })
      cleanups.push(served.dispose)
      for (const r of ROWS) await insert(url, r)
      await execDb(
        url,
        "INSERT INTO docket_workflow_activities (execution_id, name, attempt, result, created_at) VALUES (?, 'ask', 1, ?, ?)",
        "INSERT INTO docket_workflow_activities (execution_id, name, attempt, result, created_at) VALUES ($1, 'ask', 1, $2, $3)",
        ["wait-old", JSON.stringify({ _tag: "Complete", exit: { _tag: "Success" } }), Date.now() - 600_000]
      )
      const login = await postForm(`${served.root}/login`, { token: TOKEN })
      const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]
      const page = await (await get(`${served.root}/workflows/wait-new`, { cookie })).text()
      session = { cookie, csrf: /name="_csrf" value="([^"]+)"/.exec(page)![1] }
    }, 180_000)

    const api = async (path: string) => {
      const response = await get(`${served.root}/api${path}`)
      return { status: response.status, body: await response.json() as any }
    }
    const stateOf = async (id: string) => (await api(`/workflows/${id}`)).body.state as string
    const runItems = async (workflow: string) =>
      (await served.repo((r) => r.list({ kind: `workflow:${workflow}`, limit: 100 }))).items.map((i) => i.payload)

    it("lists executions by state and workflow, and shows one, as pages and as JSON", async () => {
      const ids = async (query: string) => (await api(`/workflows${query}`)).body.executions.map((e: { executionId: string }) => e.executionId)
      expect(await ids("")).toEqual(["run-1", "done-1", "wait-new", "wait-old"])
      expect(await ids("?state=suspended")).toEqual(["wait-new", "wait-old"])
      expect(await ids("?workflow=Steps")).toEqual(["run-1", "done-1"])
      expect(await ids("?state=complete&workflow=Approve")).toEqual([])
      expect(await ids("?limit=1")).toEqual(["run-1"])
      // A page at a time: the cursor of a full page gives the next one; the last page's is null.
      const first = (await api("/workflows?state=suspended&limit=1")).body
      expect(first.executions.map((e: { executionId: string }) => e.executionId)).toEqual(["wait-new"])
      const second = (await api(`/workflows?state=suspended&limit=1&cursor=${encodeURIComponent(first.cursor)}`)).body
      expect(second.executions.map((e: { executionId: string }) => e.executionId)).toEqual(["wait-old"])
      expect((await api(`/workflows?state=suspended&limit=5`)).body.cursor).toBeNull()
      expect(await api("/workflows?cursor=soon")).toEqual({ status: 400, body: { error: "invalid cursor", status: 400 } })
      const next = await (await get(`${served.root}/workflows?state=suspended&limit=1`)).text()
      expect(next).toContain(`<a rel="next" href="/workflows?state=suspended&amp;limit=1&amp;cursor=${encodeURIComponent(first.cursor)}">next page</a>`)
      expect(await api("/workflows?state=asleep")).toEqual({ status: 400, body: { error: "invalid state: must be one of running, suspended, complete", status: 400 } })
      expect(await api("/workflows?limit=0")).toMatchObject({ status: 400 })
      expect(await api("/workflows/nope")).toEqual({ status: 404, body: { error: "no workflow execution nope", status: 404 } })
      const detail = await api("/workflows/wait-old")
      expect(detail.body).toMatchObject({
        executionId: "wait-old", workflow: "Approve", state: "suspended", payload: { tag: HOSTILE }, result: null,
        activities: [{ name: "ask", attempt: 1, result: { _tag: "Complete", exit: { _tag: "Success" } } }],
        deferreds: [], clocks: [], children: []
      })
      expect((await api("/workflows/run-1")).body.children).toMatchObject([{ executionId: "done-1", state: "complete" }])

      const list = await get(`${served.root}/workflows?state=suspended`)
      expect(list.status).toBe(200)
      expect(list.headers.get("content-security-policy")).toBe(CSP)
      const listText = await list.text()
      expect(listText).toContain(`<a href="/workflows/wait-old">wait-old</a>`)
      expect(listText).not.toContain("run-1")
      expect(listText).toContain(`<option value="suspended" selected>`)
      const page = await get(`${served.root}/workflows/wait-old`)
      const text = await page.text()
      expect(page.status).toBe(200)
      expect(text).toContain("&lt;script&gt;alert(1)&lt;/script&gt;")
      expect(text).not.toContain(HOSTILE)
      expect(text).toMatch(/<td>ask<\/td><td class="n">1<\/td>/)
      // Not logged in: no action offered.
      expect(text).not.toMatch(/<form[^>]*method="post"/)
      expect((await get(`${served.root}/workflows/nope`)).status).toBe(404)
      expect(await (await get(`${served.root}/`)).text()).toContain(`<a href="/workflows">Workflows</a>`)
    })

    it("exposes executions by workflow and state and the oldest suspended one's wait in /metrics", async () => {
      const metrics = parseMetrics(await (await get(`${served.root}/metrics`)).text())
      expect(metrics.get(`docket_workflow_executions{workflow="Approve",state="suspended"}`)).toBe(2)
      expect(metrics.get(`docket_workflow_executions{workflow="Approve",state="running"}`)).toBe(0)
      expect(metrics.get(`docket_workflow_executions{workflow="Steps",state="running"}`)).toBe(1)
      expect(metrics.get(`docket_workflow_executions{workflow="Steps",state="complete"}`)).toBe(1)
      const oldest = metrics.get(`docket_workflow_oldest_suspended_seconds{workflow="Approve"}`)!
      expect(oldest).toBeGreaterThanOrEqual(600)
      expect(oldest).toBeLessThan(900)
      expect(metrics.get(`docket_workflow_oldest_suspended_seconds{workflow="Steps"}`)).toBe(0)
    })

    it("refuses actions without the token, the CSRF token, from another site or by GET, and changes nothing", async () => {
      const { cookie } = session
      const refusals: Array<[Response, number]> = [
        [await postJson(`${served.root}/api/workflows/wait-new/resume`), 401],
        [await postJson(`${served.root}/api/workflows/wait-new/resume`, undefined, { authorization: "Bearer wrong-token-0123456789" }), 403],
        [await postForm(`${served.root}/workflows/wait-new/resume`, {}, { cookie }), 403],
        [await postForm(`${served.root}/workflows/wait-new/interrupt`, { _csrf: session.csrf }, { cookie, origin: "https://evil.example" }), 403],
        [await get(`${served.root}/workflows/wait-new/resume`, { cookie }), 405],
        [await get(`${served.root}/api/workflows/wait-new/interrupt`), 405]
      ]
      // A dashboard started without a token: read-only, whatever is sent.
      const readOnly = await serve(url, {})
      cleanups.push(readOnly.dispose)
      refusals.push([await postJson(`${readOnly.root}/api/workflows/wait-new/resume`, undefined, { authorization: `Bearer ${TOKEN}` }), 403])
      expect(await (await get(`${readOnly.root}/workflows/wait-new`)).text()).not.toMatch(/<form[^>]*method="post"/)
      for (const [response, status] of refusals) expect(response.status, response.url).toBe(status)
      expect(await stateOf("wait-new")).toBe("suspended")
      expect((await api("/workflows/wait-new")).body.deferreds).toEqual([])
      expect(await runItems("Approve")).toEqual([])
    })

    it("resumes by form and interrupts by API: the execution is woken, the interrupt stored; wrong states are 409", async () => {
      const { cookie, csrf } = session
      const page = await (await get(`${served.root}/workflows/wait-new`, { cookie })).text()
      expect(page).toContain(`action="/workflows/wait-new/resume"`)
      expect(page).toContain(`action="/workflows/wait-new/interrupt"`)
      const resumed = await postForm(`${served.root}/workflows/wait-new/resume`, { _csrf: csrf }, { cookie })
      expect(resumed.status).toBe(303)
      expect(resumed.headers.get("location")).toBe("/workflows/wait-new?done=resumed")
      expect(await (await get(`${served.root}/workflows/wait-new?done=resumed`, { cookie })).text()).toContain("Resumed: another run replays it.")
      expect(await stateOf("wait-new")).toBe("running")
      expect(await runItems("Approve")).toEqual([{ executionId: "wait-new" }])

      const bearer = { authorization: `Bearer ${TOKEN}` }
      const interrupted = await postJson(`${served.root}/api/workflows/wait-old/interrupt`, undefined, bearer)
      expect([interrupted.status, await interrupted.json()]).toEqual([200, { executionId: "wait-old", action: "interrupt", outcome: "interrupted" }])
      const detail = (await api("/workflows/wait-old")).body
      expect(detail.state).toBe("running")
      expect(detail.deferreds.map((d: { name: string }) => d.name)).toEqual(["Workflow/InterruptSignal"])

      const conflicts: Array<[string, number, string]> = [
        ["done-1/interrupt", 409, "workflow execution done-1 is complete: nothing to interrupt"],
        ["run-1/resume", 409, "workflow execution run-1 is not suspended: nothing to resume"],
        ["nope/interrupt", 404, "no workflow execution nope"],
        ["run-1/restart", 404, "no action restart (interrupt, resume)"]
      ]
      for (const [path, status, error] of conflicts) {
        const r = await postJson(`${served.root}/api/workflows/${path}`, undefined, bearer)
        expect([r.status, await r.json()], path).toEqual([status, { error, status }])
      }
      expect(await stateOf("done-1")).toBe("complete")
      expect((await api("/workflows/done-1")).body.deferreds).toEqual([])
      expect(await runItems("Steps")).toEqual([])
      // The metrics' cached counts were forgotten by the actions: the next scrape shows them.
      const metrics = parseMetrics(await (await get(`${served.root}/metrics`)).text())
      expect(metrics.get(`docket_workflow_executions{workflow="Approve",state="suspended"}`)).toBe(0)
      expect(metrics.get(`docket_workflow_executions{workflow="Approve",state="running"}`)).toBe(2)
      expect(metrics.get(`docket_workflow_oldest_suspended_seconds{workflow="Approve"}`)).toBe(0)
    })
  })
})
