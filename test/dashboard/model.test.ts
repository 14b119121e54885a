/**
 * The dashboard's pure parts: the escaping template, the overview cache
 * (one read per 2 s whatever the viewers), the session and token checks,
 * the Host check, the wrong-token count, the rate reading.
 */
import { Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import type { QueueRepo } from "../../src/index.js"
import * as Auth from "../../src/internal/dashboard/auth.js"
import { html, unsafeRaw } from "../../src/internal/dashboard/html.js"
import * as Model from "../../src/internal/dashboard/model.js"

describe("the escaping template", () => {
  it("escapes every interpolation, nested lists included, and inserts only its own markup", () => {
    const hostile = `<img src=x onerror="alert('1')">\`&`
    const out = html`<p title="${hostile}">${hostile}${[hostile, [hostile]]}${html`<b>${hostile}</b>`}${null}${undefined}${false}${7}</p>`.value
    expect(out).not.toContain("<img")
    expect(out).toContain("&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&#96;&amp;")
    expect(out.startsWith(`<p title="&lt;img`)).toBe(true)
    expect(out).toContain("<b>&lt;img")
    expect(out.endsWith("7</p>")).toBe(true)
    expect(html`${unsafeRaw("<hr>")}`.value).toBe("<hr>")
  })
})

describe("the overview cache", () => {
  const stub = (calls: { n: number }) => ({
    listKinds: Effect.sync(() => {
      calls.n++
      return []
    }),
    oldestDue: Effect.succeed([]),
    groupsDue: Effect.succeed([]),
    finishedPerMinute: () => Effect.succeed([]),
    retriedPerMinute: () => Effect.succeed([]),
    listWorkers: () => Effect.succeed([]),
    horizon: () => Effect.succeed(Option.none())
  }) as unknown as QueueRepo.Service

  it("reads once per 2 s however many read it, again after clear() (an action)", async () => {
    let now = 1_000_000
    const calls = { n: 0 }
    const repo = stub(calls)
    const cache = new Model.OverviewCache({ ageMs: 300_000, transactions: 100_000 }, () => now)
    for (let i = 0; i < 5; i++) await Effect.runPromise(cache.read(repo))
    expect(calls.n).toBe(1)
    now += Model.OVERVIEW_TTL_MS - 1
    await Effect.runPromise(cache.read(repo))
    expect(calls.n).toBe(1)
    now += 1
    await Effect.runPromise(cache.read(repo))
    expect(calls.n).toBe(2)
    cache.clear()
    await Effect.runPromise(cache.read(repo))
    expect(calls.n).toBe(3)
    // A clock that went back never serves a read from its future.
    now -= 10_000
    await Effect.runPromise(cache.read(repo))
    expect(calls.n).toBe(4)
  })
})

describe("tokens, sessions and hosts", () => {
  const token = "a-token-0123456789abcdef"

  it("a session is valid for its token for 12 hours; tampered, of another token or expired it is none", () => {
    const now = 1_800_000_000_000
    const cookie = Auth.newSession(token, now)
    const id = Auth.sessionId(cookie, token, now + 1000)
    expect(id).not.toBeNull()
    expect(Auth.csrfToken(token, id!)).toBe(Auth.csrfToken(token, id!))
    expect(Auth.sessionId(cookie, "another-token-0123456789", now)).toBeNull()
    expect(Auth.sessionId(cookie.replace(/.$/, (c) => (c === "A" ? "B" : "A")), token, now)).toBeNull()
    expect(Auth.sessionId(cookie, token, now + Auth.SESSION_MS)).toBeNull()
    expect(Auth.sessionId(cookie, token, now - 1)).toBeNull()
    expect(Auth.sessionId(undefined, token, now)).toBeNull()
    expect(Auth.sameSecret(token, token)).toBe(true)
    expect(Auth.sameSecret("", token)).toBe(false)
    expect(Auth.sameSecret(`${token}x`, token)).toBe(false)
  })

  it("Host names: loopback ones at any port, case-insensitively; lookalikes refused", () => {
    const ok = ["127.0.0.1:4680", "localhost", "LocalHost:1", "[::1]:4680", "[::1]"]
    for (const host of ok) expect(Auth.hostAllowed(host, Auth.LOOPBACK_HOSTS), host).toBe(true)
    const refused = [undefined, "evil.example", "127.0.0.1.evil.example:4680", "localhost.evil:80", "[::2]:4680", ""]
    for (const host of refused) expect(Auth.hostAllowed(host, Auth.LOOPBACK_HOSTS), String(host)).toBe(false)
  })

  it("an address is blocked after 10 wrong tokens within a minute, and free again after it; others unaffected", () => {
    const wrong = new Auth.WrongTokens()
    for (let i = 0; i < Auth.MAX_WRONG_TOKENS - 1; i++) wrong.failed("a", 1000 + i)
    expect(wrong.blocked("a", 2000)).toBe(false)
    wrong.failed("a", 2000)
    expect(wrong.blocked("a", 2001)).toBe(true)
    expect(wrong.blocked("b", 2001)).toBe(false)
    expect(wrong.blocked("a", 2000 + 60_000)).toBe(false)
  })

  it("cross-site: Sec-Fetch-Site other than same-origin, or an Origin of another host, is refused", () => {
    const facts = (headers: Record<string, string>) => ({ headers: { host: "127.0.0.1:4680", ...headers }, cookies: {} })
    expect(Auth.crossSite(facts({}))).toBeNull()
    expect(Auth.crossSite(facts({ "sec-fetch-site": "same-origin", origin: "http://127.0.0.1:4680" }))).toBeNull()
    expect(Auth.crossSite(facts({ "sec-fetch-site": "same-site" }))).not.toBeNull()
    expect(Auth.crossSite(facts({ "sec-fetch-site": "none" }))).not.toBeNull()
    expect(Auth.crossSite(facts({ origin: "http://127.0.0.1:4681" }))).not.toBeNull()
    expect(Auth.crossSite(facts({ origin: "null" }))).not.toBeNull()
  })

  it("behind a proxy: the public origin's posts are not cross-site, other origins still are", () => {
    const facts = (headers: Record<string, string>) => ({ headers: { host: "127.0.0.1:4680", ...headers }, cookies: {} })
    const origins = ["https://ops.example.com"]
    expect(Auth.crossSite(facts({ origin: "https://ops.example.com" }), origins)).toBeNull()
    expect(Auth.crossSite(facts({ origin: "https://ops.example.com" }))).not.toBeNull()
    expect(Auth.crossSite(facts({ origin: "http://ops.example.com" }), origins)).not.toBeNull()
    expect(Auth.crossSite(facts({ origin: "https://ops.example.com.evil.example" }), origins)).not.toBeNull()
    expect(Auth.crossSite(facts({ origin: "https://ops.example.com", "sec-fetch-site": "cross-site" }), origins)).not.toBeNull()
    expect(Auth.publicOrigin("https://Ops.Example.com/docket/")).toEqual({ origin: "https://ops.example.com", hostname: "ops.example.com" })
    expect(Auth.publicOrigin("https://[::1]:8443")).toEqual({ origin: "https://[::1]:8443", hostname: "[::1]" })
    expect(Auth.publicOrigin("ops.example.com")).toMatch(/must be a URL/)
    expect(Auth.publicOrigin("ftp://ops.example.com")).toMatch(/http or https/)
  })

  it("only a Bearer header is a token attempt: a proxy's Basic header leaves the session cookie in charge", () => {
    const token = "test-token-0123456789abcdef"
    const session = Auth.newSession(token, 1_000)
    const facts = (authorization: string | undefined, cookie: string | undefined) => ({
      headers: authorization === undefined ? {} : { authorization },
      cookies: cookie === undefined ? {} : { [Auth.SESSION_COOKIE]: cookie }
    })
    expect(Auth.access(facts("Basic dXNlcjpwYXNz", session), token, 2_000)._tag).toBe("Session")
    expect(Auth.access(facts("Basic dXNlcjpwYXNz", undefined), token, 2_000)._tag).toBe("Anonymous")
    expect(Auth.access(facts("Bearer nope-nope-nope-nope", session), token, 2_000)._tag).toBe("BadToken")
    expect(Auth.access(facts("Bearer", session), token, 2_000)._tag).toBe("BadToken")
    expect(Auth.access(facts(`bearer ${token}`, undefined), token, 2_000)._tag).toBe("Bearer")
  })
})

describe("the limits form", () => {
  it("reads N/PERIOD and a concurrency; none or empty removes; anything else is a 400", async () => {
    const rate = (text: string) => Effect.runPromise(Model.readRate(text))
    const refused = (text: string) => Effect.runPromise(Effect.flip(Model.readRate(text)))
    expect(await rate("100/1m")).toEqual({ limit: 100, period: 60_000 })
    expect(await rate(" 5 / 500ms ")).toEqual({ limit: 5, period: 500 })
    expect(await rate("none")).toBeNull()
    expect(await rate("")).toBeNull()
    expect(await refused("100 per minute")).toMatchObject({ status: 400 })
    expect(Model.periodText(60_000)).toBe("1m")
    expect(Model.periodText(1500)).toBe("1500ms")
    expect(await Effect.runPromise(Effect.flip(Model.readConcurrency("x")))).toMatchObject({ status: 400 })
    expect(await Effect.runPromise(Model.readConcurrency(" 3 "))).toBe(3)
  })
})
