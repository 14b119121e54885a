/**
 * The dashboard in a real browser (the system's Chromium, driven by
 * playwright-core), on a SQLite file and on a fresh PostgreSQL database, over
 * a queue with an item in every state: what the pages show, the filters, an
 * item's page, logging in and acting by form (each action checked by reading
 * the database directly), hostile payloads making no element and running no
 * code, the pages with JavaScript off, the throughput chart, and no console
 * error or CSP violation on any page. Outside CI a missing Chromium skips it
 * with the reason; under CI=true it fails.
 *
 * `npm run screenshots` runs it with DOCKET_SCREENSHOTS=docs/dashboard: the
 * SQLite run then also writes a PNG of each main page there.
 */
import Sqlite from "better-sqlite3"
import { Effect } from "effect"
import { join } from "node:path"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type QueueRepo } from "../../src/index.js"
import { browserMissing, launch, pausedInDb, queryDb, stateInDb, watch } from "../support/browser.js"
import { cliBackends } from "../support/cli.js"
import { execDb, type Seeded, seed, serve, type Served } from "../support/dashboard.js"

const TOKEN = "browser-token-0123456789abcdef"
const SHOTS = process.env.DOCKET_SCREENSHOTS
const XSS = { img: "<img src=x onerror=window.__xss=1>", script: "</script><script>window.__xss=2</script>" }
const XSS_PAYLOAD = { html: XSS.img, s: XSS.script }

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
}, 180_000)

/** An item whose payload is the hostile strings (made dead, with them as its error, in the set-up). */
const enqueueHostile = (repo: QueueRepo.Service) => repo.enqueue("hostile.browser", XSS_PAYLOAD)

describe.skipIf(browserMissing !== null)("the dashboard in Chromium", () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await launch()
    cleanups.push(() => browser.close())
  })

  describe.each(cliBackends(cleanups))("on $name", (backend) => {
    describe.skipIf(backend.skip)("", () => {
      let url: string
      let served: Served
      let ids: Seeded
      let hostile: number
      let context: BrowserContext
      const problems: Array<string> = []

      beforeAll(async () => {
        url = await backend.fresh()
        served = await serve(url, { token: TOKEN })
        cleanups.push(served.dispose)
        ids = await served.repo(seed)
        hostile = (await served.repo(enqueueHostile)).id
        const [claim] = await served.repo((r) => r.claim({ worker: "host-a:1:run", limit: 1, lease: "1 minute", kinds: ["hostile.browser"] }))
        await served.repo((r) => r.fail(claim, `Permanent: ${XSS.img} ${XSS.script}`, { _tag: "Dead" }))
        context = await browser.newContext({ viewport: { width: 1200, height: 800 } })
        context.setDefaultTimeout(10_000)
        cleanups.push(() => context.close())
      }, 180_000)

      const opened: Array<Page> = []
      // Each test's pages closed (none keeps refreshing), and none had a console error or CSP violation.
      afterEach(async () => {
        for (const page of opened.splice(0)) await page.close()
        expect(problems.splice(0)).toEqual([])
      })

      /** A new watched page of `on` at `path`, loaded. */
      const open = async (path: string, on: BrowserContext = context): Promise<Page> => {
        const page = await watch(await on.newPage(), problems)
        opened.push(page)
        await page.goto(`${served.root}${path}`)
        return page
      }

      const login = async (page: Page) => {
        await page.goto(`${served.root}/login`)
        await page.fill("input[name=token]", TOKEN)
        await Promise.all([page.waitForURL(`${served.root}/`), page.click("button[type=submit]")])
        await expect.poll(() => page.locator(".who").innerText()).toContain("can act")
      }

      it("the overview shows the counts of the queue", async () => {
        const page = await open("/")
        const card = (label: string) => page.locator(".card", { has: page.locator(`.muted:text-is("${label}")`) }).locator(".v")
        expect(await card("waiting").innerText()).toBe("1")
        expect(await card("running").innerText()).toBe("1")
        expect(await card("scheduled").innerText()).toBe("1")
        expect(await card("dead").innerText()).toBe("2")
        expect(await card("done, last hour").innerText()).toBe("1")
        expect(await card("dead, last hour").innerText()).toBe("2")
        expect(await card("live workers").innerText()).toBe("1")
        const mail = page.locator("#kinds tbody tr", { hasText: "mail.send" }).locator("td")
        // kind, waiting, scheduled, running, done, dead, cancelled
        expect((await mail.allInnerTexts()).slice(0, 7)).toEqual(["mail.send", "1", "1", "0", "0", "0", "1"])
      })

      it("the overview draws the throughput chart (a canvas) from the API, with no CSP violation", async () => {
        const page = await open("/")
        await page.waitForSelector("#throughput-chart[data-drawn=true] canvas")
        const legend = await page.locator("#throughput-chart .u-legend").innerText()
        for (const label of ["done", "dead", "cancelled", "retried"]) expect(legend).toContain(label)
        // The table below has the same figures (it is what a page without JavaScript shows).
        expect(await page.locator("#throughput tbody tr").count()).toBeGreaterThan(0)
      })

      it("the item list filters by state, kind and text", async () => {
        const page = await open("/items")
        const rows = async () => {
          const cells = await page.locator("#items tbody tr").evaluateAll((trs) =>
            trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? ""))
          )
          return cells.map((c) => [Number(c[0]), c[2]])
        }
        expect((await rows()).length).toBe(7)
        await page.selectOption("select[name=state]", "dead")
        await Promise.all([page.waitForURL(/state=dead/), page.click("form.filters button[type=submit]")])
        expect(await rows()).toEqual([[hostile, "dead"], [ids.dead, "dead"]])
        await page.selectOption("select[name=state]", "")
        await page.fill("input[name=kind]", "mail.send")
        await Promise.all([page.waitForURL(/kind=mail\.send/), page.click("form.filters button[type=submit]")])
        expect(await rows()).toEqual([[ids.cancelled, "cancelled"], [ids.scheduled, "scheduled"], [ids.waiting, "waiting"]])
        await page.fill("input[name=kind]", "")
        await page.fill("input[name=q]", "later@example")
        await Promise.all([page.waitForURL(/q=later/), page.click("form.filters button[type=submit]")])
        expect(await rows()).toEqual([[ids.scheduled, "scheduled"]])
        await page.goto(`${served.root}/items?q=${encodeURIComponent("nothing-matches-this")}`)
        expect(await rows()).toEqual([])
        expect(await page.locator("#live-items").innerText()).toContain("No items")
      })

      it("a list refreshes by itself: an item enqueued after the page loaded shows up without a reload", async () => {
        const page = await open("/items?kind=live.arrival")
        expect(await page.locator("#live-items").innerText()).not.toContain("live.arrival")
        // Set on this document: a reload would make a new one without it.
        await page.evaluate("window.__sameDocument = true")
        const { id } = await served.repo((r) => r.enqueue("live.arrival", { at: "later" }))
        await expect.poll(() => page.locator(`#live-items a[href$="/items/${id}"]`).count(), { timeout: 20_000 }).toBe(1)
        expect(await page.evaluate<unknown>("window.__sameDocument")).toBe(true)
        expect(await page.locator("#live-status").innerText()).toMatch(/^live, updated /)
        // Not left waiting for the tests after it (their counts).
        expect(await served.repo((r) => r.cancel([id]))).toEqual(["cancelled"])
      })

      it("an item's page shows its payload pretty, its errors and its timeline", async () => {
        const page = await open(`/items/${hostile}`)
        expect(await page.locator("#payload").textContent()).toBe(JSON.stringify(XSS_PAYLOAD, null, 2))
        const errors = await page.locator("#errors tbody tr td").allTextContents()
        expect(errors[0]).toBe("1")
        expect(errors[2]).toBe("host-a:1:run")
        expect(errors[3]).toBe(`Permanent: ${XSS.img} ${XSS.script}`)
        const timeline = await page.locator("#timeline tbody tr td:nth-child(2)").allTextContents()
        expect(timeline).toEqual(["enqueued", "attempt 1 failed", "dead"])
        const done = await open(`/items/${ids.done}`)
        expect(JSON.parse((await done.locator("#result").textContent()) ?? "")).toMatchObject({ url: "https://example.com/x" })
      })

      it("hostile payloads show as text: no element made, no code run", async () => {
        for (const path of ["/", "/items", "/items?state=dead", `/items/${hostile}`, `/items?q=${encodeURIComponent(XSS.img)}`, "/kinds"]) {
          const page = await open(path)
          // A string: the tests compile without the DOM's types.
          const found = await page.evaluate<{ img: number; xss: unknown; scripts: Array<string | null> }>(`({
            img: document.querySelectorAll("img").length,
            xss: window.__xss,
            scripts: [...document.querySelectorAll("script")].map((s) => s.getAttribute("src"))
          })`)
          expect(found.img, path).toBe(0)
          expect(found.xss, path).toBeUndefined()
          for (const src of found.scripts) expect(src, path).toMatch(/^\/assets\/[\w.-]+\.js$/)
        }
        const item = await open(`/items/${hostile}`)
        const text = await item.locator("main").innerText()
        expect(text).toContain(XSS.img)
        expect(text).toContain(XSS.script)
      })

      it("logged in by the form, retrying a dead item makes it wait in the database", async () => {
        const page = await open("/login")
        await login(page)
        await page.goto(`${served.root}/items/${ids.dead}`)
        await Promise.all([page.waitForURL(/done=retried/), page.click("#actions button:text-is('Retry')")])
        expect(await page.locator("#notice").innerText()).toContain("Retried")
        expect(await stateInDb(url, ids.dead)).toBe("waiting")
      })

      it("logged in, pausing a kind from the kinds page pauses it in the database", async () => {
        expect(await pausedInDb(url, "report.build")).toBe(false)
        // A context of its own: logged in here, not by the test before it.
        const own = await browser.newContext({ viewport: { width: 1200, height: 800 } })
        own.setDefaultTimeout(10_000)
        cleanups.push(() => own.close())
        const page = await open("/login", own)
        await login(page)
        await page.goto(`${served.root}/kinds`)
        const row = page.locator("#kinds tbody tr", { hasText: "report.build" })
        await Promise.all([page.waitForURL(`${served.root}/kinds`), row.locator("button:text-is('Pause')").click()])
        await expect.poll(() => row.locator("td").nth(1).innerText()).toBe("paused")
        expect(await row.locator("button:text-is('Resume')").count()).toBe(1)
        expect(await pausedInDb(url, "report.build")).toBe(true)
      })

      it("with JavaScript off the pages render, and logging in and cancelling by form works", async () => {
        const plain = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1200, height: 800 } })
        plain.setDefaultTimeout(10_000)
        cleanups.push(() => plain.close())
        const headings: ReadonlyArray<readonly [string, string]> = [["/", "Overview"], ["/items", "Items"], [`/items/${ids.done}`, `Item ${ids.done}`], [
          "/kinds",
          "Kinds"
        ], ["/recurring", "Recurring schedules"], ["/workers", "Workers"]]
        const page = await open("/", plain)
        for (const [path, heading] of headings) {
          await page.goto(`${served.root}${path}`)
          expect(await page.locator("h1").innerText(), path).toContain(heading)
          expect(await page.locator("#live-status").innerText(), path).toBe("")
        }
        expect(await page.locator("#workers tbody tr").count()).toBe(1)
        // Without JavaScript the overview's throughput is its table, the chart's place empty.
        await page.goto(`${served.root}/`)
        expect(await page.locator("#throughput-chart canvas").count()).toBe(0)
        const figures = await page.locator("#throughput tbody tr td").allInnerTexts()
        expect(figures.slice(1, 4).map(Number).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
        await login(page)
        await page.goto(`${served.root}/items/${ids.waiting}`)
        await Promise.all([page.waitForURL(/done=cancelled/), page.click("#actions button:text-is('Cancel')")])
        expect(await page.locator("#notice").innerText()).toContain("Cancelled")
        expect(await stateInDb(url, ids.waiting)).toBe("cancelled")
      })

      it("the workflow pages: the list filters by state, an execution shows its activities, and logged in an interrupt by the form is stored", async () => {
        // Executions written straight into the engine's tables (as test/dashboard/workflows.test.ts does): no workflow runs here.
        const at = Date.now() - 60_000
        for (const [id, workflow, state] of [["approve-1", "Approve", "suspended"], ["steps-1", "Steps", "complete"]] as const) {
          await execDb(
            url,
            `INSERT INTO docket_workflow_executions (execution_id, workflow, payload, state, result, runs, created_at, updated_at, completed_at)
               VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)`,
            `INSERT INTO docket_workflow_executions (execution_id, workflow, payload, state, result, runs, created_at, updated_at, completed_at)
               VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8)`,
            [id, workflow, JSON.stringify({ html: XSS.img }), state,
              state === "complete" ? JSON.stringify({ _tag: "Complete", exit: { _tag: "Success", value: 3 } }) : null,
              at, at, state === "complete" ? at : null]
          )
        }
        await execDb(
          url,
          "INSERT INTO docket_workflow_activities (execution_id, name, attempt, result, created_at) VALUES (?, 'ask', 1, ?, ?)",
          "INSERT INTO docket_workflow_activities (execution_id, name, attempt, result, created_at) VALUES ($1, 'ask', 1, $2, $3)",
          ["approve-1", JSON.stringify({ _tag: "Complete", exit: { _tag: "Success" } }), at]
        )
        const executions = async (page: Page) =>
          page.locator("#executions tbody tr").evaluateAll((trs) =>
            trs.map((tr) => [...tr.querySelectorAll("td")].slice(0, 3).map((td) => td.textContent ?? ""))
          )
        // A context of its own, never logged in (an earlier test logs the shared one in).
        const anonymous = await browser.newContext({ viewport: { width: 1200, height: 800 } })
        anonymous.setDefaultTimeout(10_000)
        cleanups.push(() => anonymous.close())
        const list = await open("/workflows", anonymous)
        expect(await executions(list)).toEqual([["steps-1", "Steps", "complete"], ["approve-1", "Approve", "suspended"]])
        await list.selectOption("select[name=state]", "suspended")
        await Promise.all([list.waitForURL(/state=suspended/), list.click("form.filters button[type=submit]")])
        expect(await executions(list)).toEqual([["approve-1", "Approve", "suspended"]])
        await Promise.all([list.waitForURL(/\/workflows\/approve-1$/), list.click("#executions a:text-is('approve-1')")])
        expect(await list.locator("h1").innerText()).toContain("Approve")
        expect(await list.locator("#payload").textContent()).toBe(JSON.stringify({ html: XSS.img }, null, 2))
        expect(await list.evaluate<number>(`document.querySelectorAll("img").length`)).toBe(0)
        expect(await list.locator("main").innerText()).toMatch(/ask\s+1/)
        // Not logged in: nothing to act with.
        expect(await list.locator("#actions button").count()).toBe(0)

        const own = await browser.newContext({ viewport: { width: 1200, height: 800 } })
        own.setDefaultTimeout(10_000)
        cleanups.push(() => own.close())
        const page = await open("/login", own)
        await login(page)
        await page.goto(`${served.root}/workflows/approve-1`)
        await Promise.all([page.waitForURL(/done=interrupted/), page.click("#actions button:text-is('Interrupt')")])
        expect(await page.locator("#notice").innerText()).toContain("Interrupted")
        const stored = await queryDb(
          url,
          "SELECT e.state, d.name FROM docket_workflow_executions e JOIN docket_workflow_deferreds d USING (execution_id) WHERE execution_id = ?",
          "SELECT e.state, d.name FROM docket_workflow_executions e JOIN docket_workflow_deferreds d USING (execution_id) WHERE execution_id = $1",
          ["approve-1"]
        )
        expect(stored.map((r) => [r.state, r.name])).toEqual([["running", "Workflow/InterruptSignal"]])
      })

      if (SHOTS !== undefined && backend.name === "sqlite") {
        // Last, so that the other tests' counts hold; a busier hour than the seed's, for the chart.
        it("screenshots the main pages into DOCKET_SCREENSHOTS", async () => {
          const claims = await served.repo((r) =>
            r.enqueueMany(Array.from({ length: 120 }, (_, i) => ({ kind: "export.run", payload: { export: i } }))).pipe(
              Effect.zipRight(r.claim({ worker: "host-a:1:run", limit: 120, lease: "1 minute", kinds: ["export.run"] }))
            )
          )
          await served.repo((r) => r.completeMany(claims))
          const db = new Sqlite(url)
          db.prepare("UPDATE docket_items SET finished_at = finished_at - (id % 47) * 61000 WHERE kind = 'export.run'").run()
          db.close()
          const shots = await browser.newContext({ viewport: { width: 1200, height: 800 } })
          cleanups.push(() => shots.close())
          const page = await open("/login", shots)
          await login(page)
          const pages: ReadonlyArray<readonly [string, string]> = [["overview", "/"], ["items", "/items"], ["item", `/items/${hostile}`], [
            "kinds",
            "/kinds"
          ], ["recurring", "/recurring"], ["workers", "/workers"]]
          for (const [name, path] of pages) {
            await page.goto(`${served.root}${path}`)
            if (name === "overview") await page.waitForSelector("#throughput-chart[data-drawn=true] canvas")
            await page.screenshot({ path: join(SHOTS, `${name}.png`) })
          }
        })
      }
    })
  })
})
