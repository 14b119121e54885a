/**
 * The dashboard over real HTTP on loopback, on a SQLite file and on a fresh
 * PostgreSQL database, read-only (no token): every page answers 200 with
 * its content and the CSP; the filters and the cursor; the JSON API's shapes
 * and error codes; /metrics as Prometheus text; the database's password on
 * no page. (Actions and the security model: security.test.ts.)
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cliBackends } from "../support/cli.js"
import { Script } from "node:vm"
import { chartScriptTags, CSP, execDb, get, parseMetrics, type Seeded, scriptTag, seed, serve, type Served, withoutOwnScript } from "../support/dashboard.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const PASSWORD = "s3cret-Pw-9f2"

describe.each(cliBackends(cleanups))("the dashboard on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    let served: Served
    let url: string
    let ids: Seeded & { readonly retried: number }
    beforeAll(async () => {
      url = await backend.fresh()
      // What the header shows comes from this URL: its password and query must never appear.
      const shown = `postgres://root:${PASSWORD}@db.example:5432/queue?sslpassword=${PASSWORD}`
      served = await serve(url, { database: shown })
      cleanups.push(served.dispose)
      const seeded = await served.repo(seed)
      // One attempt retried (of a kind of its own), the item then cancelled: a retry in the last hour's counts.
      const retried = await served.repo((repo) =>
        Effect.gen(function*() {
          const { id } = yield* repo.enqueue("retry.kind", { n: 1 })
          const [claim] = yield* repo.claim({ worker: "host-a:1:run", limit: 1, lease: "1 minute", kinds: ["retry.kind"] })
          expect(claim.id).toBe(id)
          expect(yield* repo.fail(claim, "Retry: later", { _tag: "Retry", delay: "1 hour" })).toBe("retried")
          yield* repo.cancel([id])
          return id
        })
      )
      ids = { ...seeded, retried }
    }, 180_000)

    const page = async (path: string) => {
      const response = await get(`${served.root}${path}`)
      const body = await response.text()
      return { response, body }
    }

    it("every page answers 200 with its content, the CSP, and never the database's password", async () => {
      const pages: Array<readonly [string, ReadonlyArray<string>]> = [
        ["/", ["<h1>Overview</h1>", "mail.send", "report.build", "export.run", "hostile.kind", "host-a", "root@db.example:5432/queue"]],
        ["/items", ["<h1>Items</h1>", `href="/items/${ids.dead}"`, `href="/items/${ids.waiting}"`]],
        [`/items/${ids.waiting}`, ["ada@example.com", "waiting"]],
        [`/items/${ids.scheduled}`, ["scheduled", "later@example.com"]],
        [`/items/${ids.running}`, ["running", "host-a:1:run"]],
        [`/items/${ids.done}`, ["done", "https://example.com/x", "id=\"result\""]],
        [`/items/${ids.dead}`, ["dead", "attempt 1 failed", "Permanent:"]],
        [`/items/${ids.cancelled}`, ["cancelled", "Cancelled: sent by hand"]],
        ["/kinds", ["<h1>Kinds</h1>", "mail.send"]],
        ["/recurring", ["digest.daily", "0 6 * * *", "mail.digest", "live"]],
        ["/workers", ["host-a", "9.9.9", "live"]],
        ["/login", ["read-only"]]
      ]
      for (const [path, expected] of pages) {
        const { body, response } = await page(path)
        expect(response.status, path).toBe(200)
        expect(response.headers.get("content-type"), path).toBe("text/html; charset=utf-8")
        expect(response.headers.get("content-security-policy"), path).toBe(CSP)
        expect(response.headers.get("x-frame-options"), path).toBe("DENY")
        for (const text of expected) expect(body, `${path} shows ${text}`).toContain(text)
        expect(body, path).not.toContain(PASSWORD)
        expect(body, path).not.toContain("sslpassword")
        // Read-only: no action is offered on any page.
        expect(body, path).not.toMatch(/<form[^>]*method="post"/)
        // One script, the package's file: no inline script (the CSP would refuse it anyway).
        expect(body.split(scriptTag("")).length, path).toBe(2)
        expect(withoutOwnScript(body, ""), path).not.toContain("<script")
      }
      const css = await get(`${served.root}/assets/dashboard-1.css`)
      expect(css.status).toBe(200)
      expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8")
      expect(await css.text()).toContain("font")
      const js = await get(`${served.root}/assets/dashboard-1.js`)
      expect(js.status).toBe(200)
      expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8")
      expect(js.headers.get("content-security-policy")).toBe(CSP)
      const source = await js.text()
      expect(() => new Script(source)).not.toThrow()
      expect(source).toContain("[data-live]")
      const missing = await page("/no/such/page")
      expect(missing.response.status).toBe(404)
      expect(missing.response.headers.get("content-security-policy")).toBe(CSP)
    })

    it("a kind's groups: a page in group order, a failure holding an ordered group; an item's page says what it waits behind; the kinds page shows the per-group limits and paused groups", async () => {
      // A database of its own: the other tests count the seeded items.
      const own = await serve(await backend.fresh(), {})
      cleanups.push(own.dispose)
      const page = async (path: string) => {
        const response = await get(`${own.root}${path}`)
        return { response, body: await response.text() }
      }
      const [first, second] = await own.repo((repo) =>
        Effect.gen(function*() {
          yield* repo.declarePerGroup("group.kind", { concurrency: 1, ordered: true })
          const added = yield* repo.enqueueMany([
            { kind: "group.kind", payload: 1, group: "tenant:<b>" },
            { kind: "group.kind", payload: 2, group: "tenant:<b>" },
            { kind: "group.kind", payload: 3, group: "tenant:<c>" }
          ])
          const claims = yield* repo.claim({ worker: "host-a:1:run", limit: 10, lease: "1 minute", kinds: ["group.kind"] })
          const head = claims.find((c) => c.id === added[0].id)!
          expect(yield* repo.fail(head, "Retry: refused", { _tag: "Retry", delay: "1 hour" })).toBe("retried")
          return added
        })
      )
      const { body, response } = await page("/kinds/group.kind/groups")
      expect(response.status).toBe(200)
      expect(body).toContain("<h1>Groups of group.kind</h1>")
      // Escaped, in group order, the held one marked.
      expect(body).toContain("tenant:&lt;b&gt;")
      expect(body.indexOf("tenant:&lt;b&gt;")).toBeLessThan(body.indexOf("tenant:&lt;c&gt;"))
      expect(body).toMatch(/class="blocked"><td>tenant:&lt;b&gt;<\/td>/)
      expect(body).toContain(`href="/items/${first.id}">#${first.id} due in`)
      const item = await page(`/items/${second.id}`)
      expect(item.body).toContain(`behind item <a href="/items/${first.id}">${first.id}</a> of group tenant:&lt;b&gt;, which waits for its retry`)
      // The kinds page: the kind's per-group limits, who set them, and its paused groups.
      await own.repo((repo) => repo.pauseGroup("group.kind", "tenant:<c>"))
      const kinds = (await page("/kinds")).body
      expect(kinds).toContain(`href="/kinds/group.kind/groups"`)
      expect(kinds).toMatch(/<td class="per-group">1 at once, ordered \(code\)<\/td><td class="n"><span class="warn">1<\/span><\/td>/)
      // /metrics: tenant:<b>'s second item waits behind its first's retry; nothing of the kind is ready.
      const samples = parseMetrics(await (await get(`${own.root}/metrics`)).text())
      expect(samples.get(`docket_items_blocked{kind="group.kind"}`)).toBe(1)
      expect(samples.get(`docket_groups_oldest_ready_seconds{kind="group.kind"}`)).toBe(0)
    })

    it("the overview loads the throughput chart from the package: uPlot's files as installed, and the script that draws it", async () => {
      const { body } = await page("/")
      expect(body).toContain(chartScriptTags(""))
      expect(body).toContain(`<div id="throughput-chart" class="chart" data-src="/api/throughput?minutes=60"`)
      const src = /<script src="(\/assets\/uplot-[\d.]+\.min\.js)"/.exec(body)
      expect(src).not.toBeNull()
      for (const [path, type] of [[src![1], "text/javascript"], [src![1].replace(/\.js$/, ".css"), "text/css"], ["/assets/chart-2.js", "text/javascript"]]) {
        const response = await get(`${served.root}${path}`)
        expect(response.status, path).toBe(200)
        expect(response.headers.get("content-type"), path).toBe(`${type}; charset=utf-8`)
        expect(response.headers.get("content-security-policy"), path).toBe(CSP)
        const text = await response.text()
        if (type === "text/javascript") expect(() => new Script(text), path).not.toThrow()
      }
      expect(await (await get(`${served.root}${src![1]}`)).text()).toContain("uPlot")
      // Only the overview loads it.
      expect((await page("/items")).body).not.toContain("uplot-")
    })

    it("the pages that refresh by themselves mark their live regions, each with an id the refreshed page has too", async () => {
      for (const [path, id] of [["/", "live-overview"], ["/items", "live-items"], [`/items/${ids.dead}`, "live-item"], ["/kinds", "live-kinds"],
        ["/recurring", "live-recurring"], ["/workers", "live-workers"]] as const) {
        const { body } = await page(path)
        expect(body, path).toContain(`<div id="${id}" data-live>`)
        expect(body, path).toContain(`<span id="live-status" class="muted"></span>`)
      }
      expect((await page("/login")).body).not.toContain("data-live")
    })

    it("the overview counts each kind by state and shows the oldest due age, the last hour's throughput and live workers", async () => {
      const { body } = await page("/")
      expect(body).toMatch(/id="kinds"/)
      expect(body).toMatch(/id="throughput"/)
      expect(body).toContain(`href="/items?kind=mail.send&amp;state=cancelled">1</a>`)
      expect(body).toContain(`href="/items?kind=hostile.kind&amp;state=dead">1</a>`)
      const api = await (await get(`${served.root}/api/overview`)).json() as {
        kinds: Array<{ kind: string; counts: Record<string, number> }>
        oldestDue: Array<{ kind: string; ageMs: number; due: number }>
        throughput: Array<{ minute: number; done: number; dead: number; cancelled: number; retried: number }>
        workers: Array<{ host: string; status: string }>
      }
      const mail = api.kinds.find((k) => k.kind === "mail.send")!
      expect(mail.counts).toMatchObject({ waiting: 1, scheduled: 1, cancelled: 1 })
      expect(api.oldestDue.map((d) => [d.kind, d.due])).toEqual([["mail.send", 1]])
      const total = api.throughput.reduce((t, m) => ({
        done: t.done + m.done, dead: t.dead + m.dead, cancelled: t.cancelled + m.cancelled, retried: t.retried + m.retried
      }), { done: 0, dead: 0, cancelled: 0, retried: 0 })
      expect(total).toEqual({ done: 1, dead: 1, cancelled: 2, retried: 1 })
      // With JavaScript off the table has the retried column, and the card the hour's retries.
      expect(body).toContain(`<th class="n">retried</th>`)
      expect(body).toMatch(/<div class="muted">retried, last hour<\/div><div class="v">1<\/div>/)
      expect(api.workers).toEqual([expect.objectContaining({ host: "host-a", status: "live" })])
    })

    it("/api/throughput gives every minute of the window as aligned columns, zeros included (a chart's data)", async () => {
      const response = await get(`${served.root}/api/throughput?minutes=30`)
      expect(response.status).toBe(200)
      const series = (await response.json()) as {
        minutes: Array<number>; done: Array<number>; dead: Array<number>; cancelled: Array<number>; retried: Array<number>
      }
      expect(series.minutes).toHaveLength(30)
      for (let i = 1; i < 30; i++) expect(series.minutes[i] - series.minutes[i - 1]).toBe(60_000)
      for (const column of [series.done, series.dead, series.cancelled, series.retried]) expect(column).toHaveLength(30)
      const sum = (xs: Array<number>) => xs.reduce((a, b) => a + b, 0)
      expect([sum(series.done), sum(series.dead), sum(series.cancelled), sum(series.retried)]).toEqual([1, 1, 2, 1])
      const one = (await (await get(`${served.root}/api/throughput?minutes=30&kind=hostile.kind`)).json()) as typeof series
      expect([sum(one.done), sum(one.dead), sum(one.cancelled), sum(one.retried)]).toEqual([0, 1, 0, 0])
      const retriedKind = (await (await get(`${served.root}/api/throughput?minutes=30&kind=retry.kind`)).json()) as typeof series
      expect([sum(retriedKind.done), sum(retriedKind.cancelled), sum(retriedKind.retried)]).toEqual([0, 1, 1])
      for (const bad of ["0", "1441", "x"]) expect((await get(`${served.root}/api/throughput?minutes=${bad}`)).status, bad).toBe(400)
    })

    it("the item list filters by state, kind, key and text, newest first, and pages by cursor", async () => {
      const list = async (query: string) => {
        const response = await get(`${served.root}/api/items?${query}`)
        expect(response.status, query).toBe(200)
        return (await response.json()) as { items: Array<{ id: number }>; cursor: string | null }
      }
      const idsOf = async (query: string) => (await list(query)).items.map((i) => i.id)
      expect(await idsOf("state=dead")).toEqual([ids.dead])
      expect(await idsOf("state=scheduled")).toEqual([ids.scheduled])
      expect(await idsOf("state=waiting&kind=mail.send")).toEqual([ids.waiting])
      expect(await idsOf("kind=mail.send")).toEqual([ids.cancelled, ids.scheduled, ids.waiting])
      expect(await idsOf(`key=${encodeURIComponent("\"><svg onload=alert(3)>")}`)).toEqual([ids.waiting])
      expect(await idsOf("q=LATER%40example")).toEqual([ids.scheduled])
      expect(await idsOf("q=permanent")).toEqual([ids.dead])
      expect(await idsOf("q=nothing-like-this")).toEqual([])
      // Pages of 2, newest first, every item once (both the list and the search).
      for (const filter of ["", "q=%7B"]) {
        const seen: Array<number> = []
        let cursor: string | null = null
        for (let n = 0; n < 10; n++) {
          const got = await list(`${filter}&limit=2${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)
          seen.push(...got.items.map((i) => i.id))
          cursor = got.cursor
          if (cursor === null) break
        }
        expect(seen, filter).toEqual(Object.values(ids).sort((a, b) => b - a))
      }
      // The HTML list: the filters kept in the form, a next-page link that works.
      const { body } = await page("/items?kind=mail.send&limit=2")
      expect(body).toContain(`value="mail.send"`)
      const next = /<a rel="next" href="([^"]+)">/.exec(body)
      expect(next).not.toBeNull()
      const second = await page(next![1].replace(/&amp;/g, "&"))
      expect(second.response.status).toBe(200)
      expect(second.body).toContain(`href="/items/${ids.waiting}"`)
      expect(second.body).not.toContain(`href="/items/${ids.cancelled}"`)
      expect(second.body).toContain("End of the list.")
    })

    it("the API answers JSON with proper status codes: the item, 404 unknown, 400 bad input, 405 an action by GET", async () => {
      const item = await get(`${served.root}/api/items/${ids.dead}`)
      expect(item.status).toBe(200)
      expect(item.headers.get("content-type")).toMatch(/^application\/json/)
      expect(await item.json()).toMatchObject({
        id: ids.dead,
        kind: "hostile.kind",
        state: "dead",
        payload: { html: "<img src=x onerror=alert(1)>" },
        errors: [expect.objectContaining({ attempt: 1 })]
      })
      const cases: Array<readonly [string, number, RegExp]> = [
        ["/api/items/999999", 404, /no item 999999/],
        ["/api/items/abc", 400, /invalid id/],
        ["/api/items/0", 400, /invalid id/],
        ["/api/items?state=bogus", 400, /invalid state/],
        ["/api/items?limit=0", 400, /invalid limit/],
        ["/api/items?cursor=not-a-cursor", 400, /invalid cursor/],
        ["/api/items?q=x&cursor=not-a-cursor", 400, /invalid cursor/],
        ["/api/nothing", 404, /no such API endpoint/],
        [`/api/items/${ids.dead}/retry`, 405, /POST only/]
      ]
      for (const [path, status, error] of cases) {
        const response = await get(`${served.root}${path}`)
        expect(response.status, path).toBe(status)
        expect(response.headers.get("content-security-policy"), path).toBe(CSP)
        const body = (await response.json()) as { error: string; status: number }
        expect(body.error, path).toMatch(error)
        expect(body.status, path).toBe(status)
      }
      expect((await served.repo((r) => r.get(ids.dead)))._tag).toBe("Some")
      const pageMissing = await page("/items/999999")
      expect(pageMissing.response.status).toBe(404)
      expect(pageMissing.body).toContain("no item 999999")
      for (const path of ["/api/kinds", "/api/recurring", "/api/workers"]) {
        const response = await get(`${served.root}${path}`)
        expect(response.status, path).toBe(200)
        expect(Array.isArray(await response.json()), path).toBe(true)
      }
    })

    it("/metrics is Prometheus text with the queue's series, read from the database", async () => {
      const response = await get(`${served.root}/metrics`)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
      const text = await response.text()
      const samples = parseMetrics(text)
      expect(samples.get(`docket_items{kind="mail.send",state="waiting"}`)).toBe(1)
      expect(samples.get(`docket_items{kind="mail.send",state="scheduled"}`)).toBe(1)
      expect(samples.get(`docket_items{kind="report.build",state="running"}`)).toBe(1)
      expect(samples.get(`docket_items{kind="export.run",state="done"}`)).toBe(1)
      expect(samples.get(`docket_items{kind="hostile.kind",state="dead"}`)).toBe(1)
      // The oldest due mail.send item made due two minutes ago: read again once the 2 s cache has passed.
      await execDb(
        url,
        "UPDATE docket_items SET run_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) - 120000 WHERE id = ?",
        "UPDATE docket_items SET run_at = docket_now_ms() - 120000 WHERE id = $1",
        [ids.waiting]
      )
      await expect.poll(async () => parseMetrics(await (await get(`${served.root}/metrics`)).text()).get(`docket_oldest_due_seconds{kind="mail.send"}`), {
        timeout: 10_000,
        interval: 250
      }).toBeGreaterThanOrEqual(120)
      const aged = parseMetrics(await (await get(`${served.root}/metrics`)).text())
      expect(aged.get(`docket_oldest_due_seconds{kind="mail.send"}`)).toBeLessThan(150)
      expect(samples.get(`docket_oldest_due_seconds{kind="export.run"}`)).toBe(0)
      expect(samples.get(`docket_finished_last_hour{kind="hostile.kind",state="dead"}`)).toBe(1)
      expect(samples.get(`docket_finished_last_hour{kind="export.run",state="done"}`)).toBe(1)
      expect(samples.get(`docket_retried_last_hour{kind="retry.kind"}`)).toBe(1)
      expect(samples.get(`docket_retried_last_hour{kind="export.run"}`)).toBe(0)
      // Counters: typed so, and counting the kept history (and what left it: test/store/insights.ts).
      expect(text).toMatch(/^# TYPE docket_finished_total counter$/m)
      expect(text).toMatch(/^# TYPE docket_retried_total counter$/m)
      expect(samples.get(`docket_finished_total{kind="export.run",state="done"}`)).toBe(1)
      expect(samples.get(`docket_finished_total{kind="hostile.kind",state="dead"}`)).toBe(1)
      expect(samples.get(`docket_finished_total{kind="mail.send",state="cancelled"}`)).toBe(1)
      expect(samples.get(`docket_retried_total{kind="retry.kind"}`)).toBe(1)
      expect(samples.get(`docket_retried_total{kind="export.run"}`)).toBe(0)
      expect(samples.get(`docket_workers{host="host-a"}`)).toBe(1)
      expect(samples.get(`docket_kind_live_workers{kind="mail.send"}`)).toBe(1)
      expect(samples.get(`docket_kind_live_workers{kind="export.run"}`)).toBe(0)
      expect(samples.get(`docket_kind_paused{kind="mail.send"}`)).toBe(0)
    })
  })
})
