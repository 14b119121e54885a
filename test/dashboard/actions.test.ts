/**
 * The dashboard's actions on every item of a filter (with a count and a
 * confirmation) and running a recurring schedule now, over real HTTP, on a
 * SQLite file and on a fresh PostgreSQL database; each checked by reading
 * the database, and refused without the token or the CSRF token.
 */
import { Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { QueueRepo } from "../../src/index.js"
import { cliBackends } from "../support/cli.js"
import { get, postForm, postJson, seed, serve, type Served } from "../support/dashboard.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const TOKEN = "actions-token-0123456789abcdef"

/** `n` dead items of `kind`, their ids. */
const deadItems = async (served: Served, kind: string, n: number) => {
  const enqueued = await served.repo((r: QueueRepo.Service) =>
    r.enqueueMany(Array.from({ length: n }, (_, i) => ({ kind, payload: { i, tag: `${kind}-payload` } })))
  )
  const claims = await served.repo((r) => r.claim({ worker: "w", limit: n, lease: "1 minute", kinds: [kind] }))
  await served.repo((r) => r.failMany(claims.map((claim) => ({ claim, error: "boom", next: { _tag: "Dead" } as const }))))
  return enqueued.map((e) => e.id)
}

const statesOf = async (served: Served, ids: ReadonlyArray<number>) =>
  Promise.all(ids.map(async (id) => Option.match(await served.repo((r) => r.get(id)), { onNone: () => "gone", onSome: (i) => i.state })))

describe.each(cliBackends(cleanups))("the dashboard's bulk and schedule actions on $name", (backend) => {
  describe.skipIf(backend.skip)("", () => {
    let served: Served
    let session: { cookie: string; csrf: string }
    beforeAll(async () => {
      const url = await backend.fresh()
      served = await serve(url, { token: TOKEN })
      cleanups.push(served.dispose)
      await served.repo(seed)
      const login = await postForm(`${served.root}/login`, { token: TOKEN })
      const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]
      const page = await (await get(`${served.root}/items`, { cookie })).text()
      session = { cookie, csrf: /name="_csrf" value="([^"]+)"/.exec(page)![1] }
    }, 180_000)

    it("a bulk retry by form shows the count first, changes nothing until confirmed, then retries every match", async () => {
      const ids = await deadItems(served, "bulk.retry", 3)
      const { cookie, csrf } = session
      const list = await (await get(`${served.root}/items?state=dead&kind=bulk.retry`, { cookie })).text()
      expect(list).toContain(`action="/items/bulk/retry"`)
      expect(list).toContain(`<input type="hidden" name="kind" value="bulk.retry">`)
      // Without its CSRF token: refused, nothing changed.
      expect((await postForm(`${served.root}/items/bulk/retry`, { state: "dead", kind: "bulk.retry", confirm: "3" }, { cookie })).status).toBe(403)
      const confirm = await postForm(`${served.root}/items/bulk/retry`, { _csrf: csrf, state: "dead", kind: "bulk.retry" }, { cookie })
      expect(confirm.status).toBe(200)
      const text = await confirm.text()
      expect(text).toContain("Retry 3 dead items?")
      const confirmation = /name="confirm" value="([0-9a-f-]{36})"/.exec(text)![1]
      expect(await statesOf(served, ids)).toEqual(["dead", "dead", "dead"])
      // One more dies after the confirmation was shown: the confirmed three are retried, not it.
      const [later] = await deadItems(served, "bulk.retry", 1)
      // A confirmation the dashboard did not give: nothing done, asked again (409) with the count now.
      const unknown = await postForm(`${served.root}/items/bulk/retry`, { _csrf: csrf, state: "dead", kind: "bulk.retry", confirm: "3" }, { cookie })
      expect(unknown.status).toBe(409)
      const unknownPage = await unknown.text()
      expect(unknownPage).toContain("That confirmation is unknown here or expired; nothing was done.")
      expect(unknownPage).toContain("Retry 4 dead items?")
      expect(await statesOf(served, [...ids, later])).toEqual(["dead", "dead", "dead", "dead"])
      const done = await postForm(`${served.root}/items/bulk/retry`, { _csrf: csrf, state: "dead", kind: "bulk.retry", confirm: confirmation }, { cookie })
      expect(done.status).toBe(303)
      expect(done.headers.get("location")).toBe("/items?state=dead&kind=bulk.retry&bulk=retry&n=3")
      expect(await statesOf(served, [...ids, later])).toEqual(["waiting", "waiting", "waiting", "dead"])
      const after = await (await get(`${served.root}${done.headers.get("location")!}`, { cookie })).text()
      expect(after).toContain("Retried 3 items.")
      // A confirmation given for another filter is not taken for this one.
      const other = await (await postForm(`${served.root}/items/bulk/retry`, { _csrf: csrf, state: "dead", kind: "bulk.retry" }, { cookie })).text()
      const otherKey = /name="confirm" value="([0-9a-f-]{36})"/.exec(other)![1]
      expect((await postForm(`${served.root}/items/bulk/retry`, { _csrf: csrf, state: "dead", confirm: otherKey }, { cookie })).status).toBe(409)
      expect(await statesOf(served, [later])).toEqual(["dead"])
      // A notice names only a known action and a number.
      const forged = await (await get(`${served.root}/items?bulk=retry&n=%3Cb%3E`, { cookie })).text()
      expect(forged).not.toContain("Retried")
    })

    it("a confirmed bulk action acts on the items its page counted: not on one that matches later, not twice", async () => {
      const ids = await deadItems(served, "bulk.changed", 3)
      const { cookie, csrf } = session
      const form = { _csrf: csrf, state: "dead", kind: "bulk.changed" }
      const text = await (await postForm(`${served.root}/items/bulk/delete`, form, { cookie })).text()
      expect(text).toContain("Delete 3 dead items?")
      const confirm = /name="confirm" value="([0-9a-f-]{36})"/.exec(text)![1]
      // Meanwhile another item dies, and someone retries one of the three.
      const [later] = await deadItems(served, "bulk.changed", 1)
      await served.repo((r) => r.retryDead({ ids: [ids[0]] }))
      const done = await postForm(`${served.root}/items/bulk/delete`, { ...form, confirm }, { cookie })
      expect(done.status).toBe(303)
      expect(done.headers.get("location")).toBe("/items?state=dead&kind=bulk.changed&bulk=delete&n=2")
      // The retried one is no longer dead (left), the one that died later was not confirmed (left).
      expect(await statesOf(served, [...ids, later])).toEqual(["waiting", "gone", "gone", "dead"])
      // A confirmation is taken once.
      const replay = await postForm(`${served.root}/items/bulk/delete`, { ...form, confirm }, { cookie })
      expect(replay.status).toBe(409)
      expect(await statesOf(served, [later])).toEqual(["dead"])
    })

    it("bulk cancel and delete through the API change exactly the matching items; without the token nothing", async () => {
      const dead = await deadItems(served, "bulk.api", 2)
      const waiting = (await served.repo((r) => r.enqueueMany([1, 2].map((i) => ({ kind: "bulk.api", payload: { i, tag: "keep" } }))))).map((e) => e.id)
      const other = (await served.repo((r) => r.enqueue("bulk.other", { tag: "keep" }))).id
      expect((await postJson(`${served.root}/api/items/bulk/cancel?kind=bulk.api`)).status).toBe(401)
      expect(await statesOf(served, waiting)).toEqual(["waiting", "waiting"])
      const bearer = { authorization: `Bearer ${TOKEN}` }
      const cancelled = await postJson(`${served.root}/api/items/bulk/cancel?kind=bulk.api`, undefined, bearer)
      expect(cancelled.status).toBe(200)
      expect(await cancelled.json()).toEqual({ action: "cancel", matched: 2, changed: 2, more: false })
      expect(await statesOf(served, [...waiting, ...dead, other])).toEqual(["cancelled", "cancelled", "dead", "dead", "waiting"])
      // Delete by text: only the dead items whose payload holds it.
      const deleted = await postJson(`${served.root}/api/items/bulk/delete?q=bulk.api-payload`, undefined, bearer)
      expect(await deleted.json()).toEqual({ action: "delete", matched: 2, changed: 2, more: false })
      expect(await statesOf(served, [...dead, other])).toEqual(["gone", "gone", "waiting"])
      expect((await postJson(`${served.root}/api/items/bulk/explode`, undefined, bearer)).status).toBe(404)
      expect((await postJson(`${served.root}/api/items/bulk/cancel?state=bogus`, undefined, bearer)).status).toBe(400)
    })

    it("a bulk run now by form makes every scheduled match due now, after a confirmation; others untouched", async () => {
      const later = (await served.repo((r) =>
        r.enqueueMany([1, 2].map((i) => ({ kind: "bulk.later", payload: { i }, delay: "1 hour" })))
      )).map((e) => e.id)
      const due = (await served.repo((r) => r.enqueue("bulk.later", { i: 3 }))).id
      const otherKind = (await served.repo((r) => r.enqueue("bulk.elsewhere", { i: 4 }, { delay: "1 hour" }))).id
      const runAt = async (id: number) => Option.getOrThrow(await served.repo((r) => r.get(id))).runAt
      const before = await Promise.all([...later, due, otherKind].map(runAt))
      const { cookie, csrf } = session
      const list = await (await get(`${served.root}/items?kind=bulk.later`, { cookie })).text()
      expect(list).toContain(`action="/items/bulk/run-now"`)
      const confirm = await postForm(`${served.root}/items/bulk/run-now`, { _csrf: csrf, kind: "bulk.later" }, { cookie })
      const confirmText = await confirm.text()
      expect(confirmText).toContain("Run now 2 scheduled items?")
      expect(await Promise.all(later.map(runAt))).toEqual(before.slice(0, 2))
      const confirmation = /name="confirm" value="([0-9a-f-]{36})"/.exec(confirmText)![1]
      const done = await postForm(`${served.root}/items/bulk/run-now`, { _csrf: csrf, kind: "bulk.later", confirm: confirmation }, { cookie })
      expect(done.status).toBe(303)
      expect(done.headers.get("location")).toBe("/items?kind=bulk.later&bulk=run-now&n=2")
      const [a, b, c, d] = await Promise.all([...later, due, otherKind].map(runAt))
      // Due now: well before the hour they were scheduled for; the due one and the other kind as they were.
      expect(a).toBeLessThan(before[0] - 30 * 60_000)
      expect(b).toBeLessThan(before[1] - 30 * 60_000)
      expect([c, d]).toEqual([before[2], before[3]])
      const after = await (await get(`${served.root}${done.headers.get("location")!}`, { cookie })).text()
      expect(after).toContain("Made due now: 2 items.")
    })

    it("runs a recurring schedule now: one item of its kind and payload, keyed as a tick; its ticks unchanged", async () => {
      const before = (await served.repo((r) => r.listSchedules)).find((s) => s.name === "digest.daily")!
      const bearer = { authorization: `Bearer ${TOKEN}` }
      expect((await postJson(`${served.root}/api/recurring/digest.daily/run`)).status).toBe(401)
      const ran = await postJson(`${served.root}/api/recurring/digest.daily/run`, undefined, bearer)
      expect(ran.status).toBe(200)
      const { id } = (await ran.json()) as { id: number }
      const item = Option.getOrThrow(await served.repo((r) => r.get(id)))
      expect(item).toMatchObject({ kind: "mail.digest", state: "waiting", payload: null })
      expect(item.key).toMatch(/^digest\.daily@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      const after = (await served.repo((r) => r.listSchedules)).find((s) => s.name === "digest.daily")!
      expect(after.nextTick).toBe(before.nextTick)
      expect(after.lastTick).toBe(before.lastTick)
      expect((await postJson(`${served.root}/api/recurring/no.such/run`, undefined, bearer)).status).toBe(404)
      // By form, from the recurring page.
      const { cookie, csrf } = session
      const page = await (await get(`${served.root}/recurring`, { cookie })).text()
      expect(page).toContain(`action="/recurring/digest.daily/run"`)
      const form = await postForm(`${served.root}/recurring/digest.daily/run`, { _csrf: csrf }, { cookie })
      expect(form.status).toBe(303)
      expect(form.headers.get("location")).toMatch(/^\/items\/\d+\?done=enqueued$/)
    })
  })
})
