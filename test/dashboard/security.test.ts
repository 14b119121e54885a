/**
 * The dashboard's security model over real HTTP, on a SQLite file and on a
 * fresh PostgreSQL database: hostile stored strings appear only as text;
 * without a token nothing can act; with one, an action needs it (a bearer
 * header, or a login's session cookie with its CSRF token) and every refused
 * request changes nothing (checked by reading the database); cross-site
 * posts are refused; the actions change what they say.
 */
import { Option } from "effect"
import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Dashboard } from "../../src/index.js"
import { cliBackends } from "../support/cli.js"
import {
  get, HOSTILE, postForm, postJson, type Seeded, seed, serve, type Served, statusWithHost, withoutOwnScript
} from "../support/dashboard.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const TOKEN = "test-token-0123456789abcdef"
const BASE = "/docket"

/** The state of an item as stored ("gone" when deleted). */
const stateOf = async (served: Served, id: number) =>
  Option.match(await served.repo((r) => r.get(id)), { onNone: () => "gone", onSome: (i) => i.state })

describe.each(cliBackends(cleanups))("the dashboard's security on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    let readOnly: Served
    let guarded: Served
    let ids: Seeded
    let url: string
    beforeAll(async () => {
      url = await backend.fresh()
      readOnly = await serve(url, {})
      cleanups.push(readOnly.dispose)
      guarded = await serve(url, { token: TOKEN, basePath: BASE })
      cleanups.push(guarded.dispose)
      ids = await readOnly.repo(seed)
    }, 180_000)

    const login = async () => {
      const response = await postForm(`${guarded.root}/login`, { token: TOKEN }, { origin: `http://${guarded.host}` })
      expect(response.status).toBe(303)
      const cookie = response.headers.get("set-cookie") ?? ""
      expect(cookie).toMatch(/^docket_session=[^;]+;/)
      expect(cookie).toMatch(/HttpOnly/i)
      expect(cookie).toMatch(/SameSite=Strict/i)
      expect(cookie).toContain(`Path=${BASE}`)
      const session = cookie.split(";")[0]
      const itemPage = await (await get(`${guarded.root}/items/${ids.dead}`, { cookie: session })).text()
      const csrf = /name="_csrf" value="([^"]+)"/.exec(itemPage)
      expect(csrf).not.toBeNull()
      return { cookie: session, csrf: csrf![1] }
    }

    it("bound to loopback names, it answers 421 to any other Host (DNS rebinding), and its pages to 127.0.0.1 and localhost", async () => {
      const local = await serve(url, { allowedHosts: Dashboard.LOOPBACK_HOSTS })
      cleanups.push(local.dispose)
      const port = Number(local.host.split(":")[1])
      const status = (host: string) => statusWithHost(port, "/items", host)
      expect(await status(`127.0.0.1:${port}`)).toBe(200)
      expect(await status(`localhost:${port}`)).toBe(200)
      expect(await status(`LOCALHOST:${port}`)).toBe(200)
      expect(await status(`evil.example:${port}`)).toBe(421)
      expect(await status("127.0.0.1.evil.example")).toBe(421)
    })

    it("after 10 wrong tokens in a minute an address is refused (429), the right token too, and nothing changes", async () => {
      const fresh = await serve(url, { token: TOKEN })
      cleanups.push(fresh.dispose)
      const retry = `${fresh.root}/api/items/${ids.dead}/retry`
      for (let i = 0; i < 10; i++) expect((await postJson(retry, undefined, { authorization: `Bearer wrong-${i}-0123456789abcdef` })).status).toBe(403)
      expect((await postJson(retry, undefined, { authorization: "Bearer wrong-again-0123456789abcdef" })).status).toBe(429)
      expect((await postJson(retry, undefined, { authorization: `Bearer ${TOKEN}` })).status).toBe(429)
      expect((await postForm(`${fresh.root}/login`, { token: TOKEN })).status).toBe(429)
      expect(await stateOf(fresh, ids.dead)).toBe("dead")
      // Another dashboard (another count) is not affected.
      expect((await postJson(`${guarded.root}/api/items/999999/retry`, undefined, { authorization: `Bearer ${TOKEN}` })).status).toBe(404)
    })

    it("hostile payloads, keys, errors, results and worker names show as text and make no element", async () => {
      const pages = ["/", "/items", `/items/${ids.waiting}`, `/items/${ids.done}`, `/items/${ids.dead}`, "/workers", "/kinds",
        `/items?q=${encodeURIComponent(HOSTILE.img)}`, `/items?key=${encodeURIComponent(HOSTILE.key)}`]
      for (const path of pages) {
        const body = withoutOwnScript(await (await get(`${readOnly.root}${path}`)).text(), "")
        expect(body, path).not.toContain("<img")
        expect(body, path).not.toContain("<svg")
        expect(body, path).not.toContain("<script")
        expect(body, path).not.toContain("</script>")
        expect(body, path).not.toContain("onerror=alert(1)>")
      }
      const dead = await (await get(`${readOnly.root}/items/${ids.dead}`)).text()
      expect(dead).toContain("&lt;img src=x onerror=alert(1)&gt;")
      expect(dead).toContain("&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;")
      const waiting = await (await get(`${readOnly.root}/items/${ids.waiting}`)).text()
      expect(waiting).toContain("&quot;&gt;&lt;svg onload=alert(3)&gt;")
      const workers = await (await get(`${readOnly.root}/workers`)).text()
      expect(workers).toContain("&lt;script&gt;alert(4)&lt;/script&gt;")
      // The search's text is shown back in the form, escaped too.
      const search = await (await get(`${readOnly.root}/items?q=${encodeURIComponent(HOSTILE.key)}`)).text()
      expect(search).toContain(`value="&quot;&gt;&lt;svg onload=alert(3)&gt;"`)
    })

    it("read-only without a token: every action answers 403, changes nothing, and no page offers one", async () => {
      const attempts = [
        () => postJson(`${readOnly.root}/api/items/${ids.dead}/retry`),
        () => postJson(`${readOnly.root}/api/items/${ids.dead}/delete`, undefined, { authorization: `Bearer ${TOKEN}` }),
        () => postJson(`${readOnly.root}/api/items/${ids.waiting}/cancel`),
        () => postJson(`${readOnly.root}/api/kinds/mail.send/pause`),
        () => postForm(`${readOnly.root}/items/${ids.dead}/retry`, { _csrf: "x" }),
        () => postForm(`${readOnly.root}/login`, { token: TOKEN })
      ]
      for (const attempt of attempts) expect((await attempt()).status).toBe(403)
      expect(await stateOf(readOnly, ids.dead)).toBe("dead")
      expect(await stateOf(readOnly, ids.waiting)).toBe("waiting")
      expect((await readOnly.repo((r) => r.listKinds)).find((k) => k.kind === "mail.send")?.paused).toBe(false)
      const item = await (await get(`${readOnly.root}/items/${ids.dead}`)).text()
      expect(item).not.toMatch(/<form[^>]*method="post"/)
    })

    it("with a token: no credentials 401, a wrong bearer 403, an action by GET 405, each changing nothing", async () => {
      const url = `${guarded.root}/api/items/${ids.dead}/retry`
      const none = await postJson(url)
      expect(none.status).toBe(401)
      expect(((await none.json()) as { error: string }).error).toMatch(/log in|Bearer/)
      expect((await postJson(url, undefined, { authorization: "Bearer wrong-token-0123456789" })).status).toBe(403)
      // Another scheme is no token attempt: no credentials (401), not a wrong token.
      expect((await postJson(url, undefined, { authorization: "Basic abc" })).status).toBe(401)
      expect((await get(url, { authorization: `Bearer ${TOKEN}` })).status).toBe(405)
      // A forged session cookie is no session.
      expect((await postForm(`${guarded.root}/items/${ids.dead}/retry`, { _csrf: "x" }, { cookie: "docket_session=abc~1.xyz" })).status).toBe(401)
      expect(await stateOf(guarded, ids.dead)).toBe("dead")
      // Pages without a session offer the login, not the actions.
      const page = await (await get(`${guarded.root}/items/${ids.dead}`)).text()
      expect(page).toContain(`href="${BASE}/login"`)
      expect(page).not.toContain("_csrf")
    })

    it("behind a reverse proxy: the public origin may log in and act (Host kept or rewritten), a Basic header leaves the session in charge and is no wrong token", async () => {
      const PUBLIC = "https://ops.example.com"
      const proxied = await serve(url, { token: TOKEN, basePath: BASE, allowedHosts: Dashboard.LOOPBACK_HOSTS, publicOrigin: PUBLIC })
      cleanups.push(proxied.dispose)
      const port = Number(proxied.host.split(":")[1])
      // A proxy that keeps the browser's Host: the public name is answered to, others still get 421.
      const status = (host: string) => statusWithHost(port, `${BASE}/items`, host)
      expect(await status("ops.example.com")).toBe(200)
      expect(await status("evil.example")).toBe(421)
      // A proxy that rewrites Host to 127.0.0.1:port: the browser's Origin is the public one.
      expect((await postForm(`${guarded.root}/login`, { token: TOKEN }, { origin: PUBLIC })).status).toBe(403)
      const basic = "Basic dXNlcjpwYXNzd29yZA=="
      const loggedIn = await postForm(`${proxied.root}/login`, { token: TOKEN }, { origin: PUBLIC, authorization: basic })
      expect(loggedIn.status).toBe(303)
      const cookie = (loggedIn.headers.get("set-cookie") ?? "").split(";")[0]
      // The proxy's Basic header on every request: the session still counts (the page offers its forms).
      const page = await (await get(`${proxied.root}/items/${ids.dead}`, { cookie, authorization: basic })).text()
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page)
      expect(csrf).not.toBeNull()
      const paused = await postForm(`${proxied.root}/kinds/proxied.kind/pause`, { _csrf: csrf![1] }, {
        cookie, authorization: basic, origin: PUBLIC, "sec-fetch-site": "same-origin"
      })
      expect(paused.status).toBe(303)
      expect((await proxied.repo((r) => r.listKinds)).find((k) => k.kind === "proxied.kind")?.paused).toBe(true)
      expect((await postForm(`${proxied.root}/kinds/proxied.kind/resume`, { _csrf: csrf![1] }, { cookie, authorization: basic, origin: PUBLIC }))
        .status).toBe(303)
      // Without a session a Basic header is no credentials (401), and twelve of them are no wrong tokens (no 429).
      for (let i = 0; i < 12; i++) {
        expect((await postJson(`${proxied.root}/api/items/${ids.dead}/retry`, undefined, { authorization: basic })).status).toBe(401)
      }
      expect((await postJson(`${proxied.root}/api/kinds/proxied.kind/pause`, undefined, { authorization: `Bearer ${TOKEN}` })).status).toBe(200)
      expect(await stateOf(proxied, ids.dead)).toBe("dead")
      // Another origin is still cross-site there.
      expect((await postForm(`${proxied.root}/login`, { token: TOKEN }, { origin: "https://evil.example" })).status).toBe(403)
    })

    it("an action's URL opened by GET answers 405 (web and API) and does nothing; a notice is only one of the fixed set", async () => {
      const paths = [
        `/items/${ids.dead}/retry`, "/items/bulk/retry", "/kinds/mail.send/pause", "/recurring/nightly/run", "/logout",
        `/api/items/${ids.dead}/delete`, "/api/kinds/mail.send/pause", "/api/recurring/nightly/run"
      ]
      for (const path of paths) {
        const response = await get(`${guarded.root}${path}`, { authorization: `Bearer ${TOKEN}` })
        expect(response.status, path).toBe(405)
        expect(response.headers.get("allow"), path).toBe("POST")
      }
      expect(await stateOf(guarded, ids.dead)).toBe("dead")
      expect((await guarded.repo((r) => r.listKinds)).find((k) => k.kind === "mail.send")?.paused ?? false).toBe(false)
      for (const done of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
        const page = await (await get(`${guarded.root}/items/${ids.dead}?done=${done}`)).text()
        expect(page, done).not.toMatch(/native code|\[object Object\]/)
        expect(page, done).not.toContain('id="notice"')
      }
      expect(await (await get(`${guarded.root}/items/${ids.dead}?done=retried`)).text()).toContain("Retried: the item waits to run again.")
    })

    it("a wrong login sets no cookie; a session without its CSRF token, or posting cross-site, is refused and changes nothing", async () => {
      const wrong = await postForm(`${guarded.root}/login`, { token: "not-the-token-at-all" })
      expect(wrong.status).toBe(403)
      expect(wrong.headers.get("set-cookie")).toBeNull()
      const crossLogin = await postForm(`${guarded.root}/login`, { token: TOKEN }, { origin: "https://evil.example" })
      expect(crossLogin.status).toBe(403)
      expect(crossLogin.headers.get("set-cookie")).toBeNull()
      const { cookie, csrf } = await login()
      const url = `${guarded.root}/items/${ids.dead}/retry`
      const refused: Array<readonly [string, Record<string, string>, Record<string, string>]> = [
        ["no CSRF token", {}, { cookie }],
        ["a wrong CSRF token", { _csrf: "A".repeat(csrf.length) }, { cookie }],
        ["another site's form (Origin)", { _csrf: csrf }, { cookie, origin: "https://evil.example" }],
        ["another site's form (Sec-Fetch-Site)", { _csrf: csrf }, { cookie, "sec-fetch-site": "cross-site" }],
        ["a sandboxed frame (Origin null)", { _csrf: csrf }, { cookie, origin: "null" }]
      ]
      for (const [why, fields, headers] of refused) {
        const response = await postForm(url, fields, headers)
        expect(response.status, why).toBe(403)
        expect(await stateOf(guarded, ids.dead), why).toBe("dead")
      }
      // A body over 64 KiB is refused unread, changing nothing.
      const big = await postForm(url, { _csrf: csrf, pad: "x".repeat(200_000) }, { cookie })
      expect(big.status).toBe(413)
      const bigJson = await postJson(`${guarded.root}/api/kinds/hostile.kind/limits`, { concurrency: 1, pad: "x".repeat(200_000) }, {
        authorization: `Bearer ${TOKEN}`
      })
      expect(bigJson.status).toBe(413)
      // Chunked, without a length: cut off at the limit (answered 400, or the connection closed mid-body).
      const chunked = await new Promise<number | "reset">((resolve) => {
        const req = request({
          host: "127.0.0.1", port: Number(guarded.host.split(":")[1]), method: "POST", path: `${BASE}/api/kinds/hostile.kind/limits`,
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", "transfer-encoding": "chunked" }
        }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        req.on("error", () => resolve("reset"))
        req.write(`{"concurrency":1,"pad":"`)
        for (let i = 0; i < 20; i++) req.write("x".repeat(10_000))
        req.end(`"}`)
      })
      expect([400, "reset"]).toContain(chunked)
      expect((await guarded.repo((r) => r.listKinds)).find((k) => k.kind === "hostile.kind")?.concurrency).toBeNull()
      expect(await stateOf(guarded, ids.dead)).toBe("dead")
      // The bearer API is refused cross-site too.
      expect((await postJson(`${guarded.root}/api/items/${ids.dead}/retry`, undefined, {
        authorization: `Bearer ${TOKEN}`, "sec-fetch-site": "cross-site"
      })).status).toBe(403)
      expect(await stateOf(guarded, ids.dead)).toBe("dead")
    })

    it("a logged-in form action changes the item and redirects back to it; logout ends the session", async () => {
      const { cookie, csrf } = await login()
      const before = await (await get(`${guarded.root}/items/${ids.scheduled}`, { cookie })).text()
      expect(before).toContain(`action="${BASE}/items/${ids.scheduled}/run-now"`)
      expect(before).toContain(`action="${BASE}/items/${ids.scheduled}/cancel"`)
      const response = await postForm(`${guarded.root}/items/${ids.scheduled}/run-now`, { _csrf: csrf }, {
        cookie, origin: `http://${guarded.host}`, "sec-fetch-site": "same-origin"
      })
      expect(response.status).toBe(303)
      expect(response.headers.get("location")).toBe(`${BASE}/items/${ids.scheduled}?done=due%20now`)
      const item = Option.getOrThrow(await guarded.repo((r) => r.get(ids.scheduled)))
      expect(item.runAt).toBeLessThanOrEqual(Date.now() + 1000)
      const after = await (await get(`${guarded.root}${response.headers.get("location")!.slice(BASE.length)}`, { cookie })).text()
      expect(after).toContain("Due now")
      // A kind's pause and limits by form.
      expect((await postForm(`${guarded.root}/kinds/report.build/pause`, { _csrf: csrf }, { cookie })).status).toBe(303)
      expect((await postForm(`${guarded.root}/kinds/report.build/limits`, { _csrf: csrf, concurrency: "3", rate: "100/1m" }, { cookie })).status)
        .toBe(303)
      const kind = (await guarded.repo((r) => r.listKinds)).find((k) => k.kind === "report.build")!
      expect(kind).toMatchObject({ paused: true, concurrency: 3, rate: { limit: 100, periodMs: 60_000 }, limitsSetBy: "person" })
      expect((await postForm(`${guarded.root}/kinds/report.build/limits`, { _csrf: csrf, concurrency: "x" }, { cookie })).status).toBe(400)
      expect((await postForm(`${guarded.root}/kinds/report.build/resume`, { _csrf: csrf }, { cookie })).status).toBe(303)
      expect((await guarded.repo((r) => r.listKinds)).find((k) => k.kind === "report.build")?.paused).toBe(false)
      // The API with the session: its CSRF token as a header instead of a field.
      expect((await postJson(`${guarded.root}/api/kinds/report.build/pause`, undefined, { cookie })).status).toBe(403)
      expect((await postJson(`${guarded.root}/api/kinds/report.build/pause`, undefined, { cookie, "x-docket-csrf": csrf })).status).toBe(200)
      expect((await postJson(`${guarded.root}/api/kinds/report.build/resume`, undefined, { cookie, "x-docket-csrf": csrf })).status).toBe(200)
      // Logout clears the cookie.
      const out = await postForm(`${guarded.root}/logout`, { _csrf: csrf }, { cookie })
      expect(out.status).toBe(303)
      expect(out.headers.get("set-cookie")).toMatch(/^docket_session=;/)
    })

    it("bearer actions go through the repository: retry, cancel, delete, run now, pause, resume, limits; 409 where the state forbids", async () => {
      const bearer = { authorization: `Bearer ${TOKEN}` }
      const act = async (path: string, body?: unknown) => {
        const response = await postJson(`${guarded.root}/api${path}`, body, bearer)
        return { status: response.status, body: (await response.json()) as Record<string, unknown> }
      }
      const [a, b, c] = await guarded.repo((r) =>
        r.enqueueMany([1, 2, 3].map((i) => ({ kind: "act.kind", payload: i, ...(i === 3 ? { delay: "1 hour" } : {}) })))
      )
      const [claim] = await guarded.repo((r) => r.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["act.kind"] }))
      expect(claim.id).toBe(a.id)
      await guarded.repo((r) => r.fail(claim, "boom", { _tag: "Dead" }))
      expect(await act(`/items/${a.id}/retry`)).toEqual({ status: 200, body: { id: a.id, action: "retry", outcome: "retried" } })
      expect(await stateOf(guarded, a.id)).toBe("waiting")
      expect((await act(`/items/${a.id}/retry`)).status).toBe(409)
      expect((await act(`/items/${a.id}/delete`)).status).toBe(409)
      expect(await act(`/items/${b.id}/cancel`)).toMatchObject({ status: 200, body: { outcome: "cancelled" } })
      expect(await stateOf(guarded, b.id)).toBe("cancelled")
      expect((await act(`/items/${b.id}/cancel`)).status).toBe(409)
      expect(await act(`/items/${c.id}/run-now`)).toMatchObject({ status: 200, body: { outcome: "due now" } })
      expect((await act(`/items/${c.id}/run-now`)).status).toBe(409)
      expect((await act("/items/999999/cancel")).status).toBe(404)
      expect((await act("/items/abc/cancel")).status).toBe(400)
      expect((await act(`/items/${c.id}/explode`)).status).toBe(404)
      // Delete a dead item.
      const [claim2] = await guarded.repo((r) => r.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["act.kind"] }))
      await guarded.repo((r) => r.fail(claim2, "boom", { _tag: "Dead" }))
      expect(await act(`/items/${claim2.id}/delete`)).toMatchObject({ status: 200, body: { outcome: "deleted" } })
      expect(await stateOf(guarded, claim2.id)).toBe("gone")
      // Kinds.
      expect((await act("/kinds/act.kind/pause")).status).toBe(200)
      expect((await act("/kinds/act.kind/limits", { concurrency: 2, rate: "10/1s" })).status).toBe(200)
      expect((await guarded.repo((r) => r.listKinds)).find((k) => k.kind === "act.kind")).toMatchObject({
        paused: true, concurrency: 2, rate: { limit: 10, periodMs: 1000 }
      })
      expect((await act("/kinds/act.kind/limits", { concurrency: null, rate: null })).status).toBe(200)
      expect((await act("/kinds/act.kind/resume")).status).toBe(200)
      expect((await guarded.repo((r) => r.listKinds)).find((k) => k.kind === "act.kind")).toMatchObject({
        paused: false, concurrency: null, rate: null
      })
      expect((await act("/kinds/act.kind/limits", { concurrency: "two" })).status).toBe(400)
      expect((await act("/kinds/act.kind/limits", { concurrency: 0 })).status).toBe(400)
      expect((await act("/kinds/bad%20kind!/pause")).status).toBe(400)
    })
  })
})
