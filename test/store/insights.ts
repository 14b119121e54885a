/**
 * The read model's operations (oldestDue, groupsDue, finishedPerMinute, retriedPerMinute, searchItems)
 * and runNow, written once and run on SQLite and PostgreSQL
 * (test/store/sqlite.test.ts, test/store/pg.test.ts). Time is moved by
 * editing rows, never by sleeping.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { type Duration, Effect, Option } from "effect"
import { QueueRepo } from "../../src/index.js"
import * as PgSchema from "../../src/internal/pgSchema.js"
import { ageFinished, type Backend, countAll, expireLease, makeDue, setRow, unsafe } from "../support/db.js"
import { dbNow, withRepo } from "../support/harness.js"
import { expectInvalid } from "../support/store.js"

const Repo = QueueRepo.QueueRepo

/** Runs `program` on a fresh database, timed out after 30 s. */
const run = <A, E>(backend: Backend, program: Effect.Effect<A, E, QueueRepo.QueueRepo | import("@effect/sql").SqlClient.SqlClient>) =>
  withRepo(backend, program).pipe(Effect.timeout("30 seconds"))

/** Fails one claimed item dead with `error`. */
const killOne = (repo: QueueRepo.Service, kind: string, error: string) =>
  Effect.gen(function*() {
    const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: [kind] })
    expect(yield* repo.fail(claim, error, { _tag: "Dead" })).toBe("dead")
    return claim.id
  })

const oldestAndFinished = (backend: Backend) => {
  it.live("oldestDue: per kind, the age of the oldest due item (waiting, or running with an ended lease), on the database clock", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      expect(yield* repo.oldestDue).toEqual([])
      const now = yield* dbNow
      const a = yield* repo.enqueue("mail", 1)
      yield* repo.enqueue("mail", 2)
      yield* setRow(a.id, { run_at: now - 90_000 })
      yield* repo.enqueue("mail", "later", { delay: "1 hour" })
      const b = yield* repo.enqueue("report", 1)
      const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["report"] })
      expect(claim.id).toBe(b.id)
      expect(yield* repo.oldestDue).toEqual([expect.objectContaining({ kind: "mail", due: 2 })])
      yield* setRow(b.id, { lease_until: now - 30_000 })
      const rows = yield* repo.oldestDue
      expect(rows.map((r) => [r.kind, r.due])).toEqual([["mail", 2], ["report", 1]])
      expect(rows[0].ageMs).toBeGreaterThanOrEqual(90_000)
      expect(rows[0].ageMs).toBeLessThan(100_000)
      expect(rows[1].ageMs).toBeGreaterThanOrEqual(30_000)
      expect(rows[1].ageMs).toBeLessThan(40_000)
    })))

  it.live("finishedPerMinute: finished items by minute, kind and state within the window; older ones left out", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueueMany([1, 2, 3].map((i) => ({ kind: "mail", payload: i })))
      const claims = yield* repo.claim({ worker: "w", limit: 2, lease: "1 minute" })
      yield* repo.completeMany(claims)
      const dead = yield* killOne(repo, "mail", "boom")
      const old = yield* repo.enqueue("mail", "old")
      const [oldClaim] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute" })
      yield* repo.complete(oldClaim)
      const now = yield* dbNow
      yield* setRow(old.id, { finished_at: now - 2 * 3600_000 })
      yield* setRow(dead, { finished_at: now - 10 * 60_000 })
      const rows = yield* repo.finishedPerMinute(60)
      const minute = (t: number) => Math.floor(t / 60_000) * 60_000
      expect(rows.find((r) => r.state === "dead")).toEqual({ minute: minute(now - 10 * 60_000), kind: "mail", state: "dead", count: 1 })
      expect(rows.filter((r) => r.state === "done").reduce((n, r) => n + r.count, 0)).toBe(2)
      expect(yield* repo.finishedPerMinute(5)).toEqual(rows.filter((r) => r.state === "done"))
      expect((yield* repo.finishedPerMinute(3 * 60)).filter((r) => r.state === "done").reduce((n, r) => n + r.count, 0)).toBe(3)
      const refused = yield* Effect.flip(repo.finishedPerMinute(0))
      expect(refused).toMatchObject({ _tag: "InvalidInput", field: "minutes" })
    })))
}

const groupsDue = (backend: Backend) => {
  it.live("groupsDue: per kind whose groups are limited or paused, the due items their group holds back and the oldest one it lets start", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const now = yield* dbNow
      const take = (kind: string, limit = 10) => repo.claim({ worker: "w", limit, lease: "1 minute", kinds: [kind] })
      const add = (kind: string, groups: ReadonlyArray<string>) =>
        repo.enqueueMany(groups.map((group, n) => ({ kind, payload: { group, n }, group })))
      // Labels only (no perGroup, no paused group): not listed, whatever its groups hold.
      yield* add("plain", ["p", "p"])
      expect(yield* repo.groupsDue).toEqual([])
      // Ordered, one at a time, a dead item holding its group.
      yield* repo.declarePerGroup("ord", { concurrency: 1, ordered: true, onDead: "hold" })
      const ord = yield* add("ord", ["a", "a", "a", "b", "b", "e", "e"])
      const firsts = yield* take("ord")
      expect(firsts.map((c) => c.id).sort((x, y) => x - y)).toEqual([ord[0].id, ord[3].id, ord[5].id])
      // b's first goes dead (it holds b), e's first waits an hour for its retry (strict: e waits).
      expect(yield* repo.fail(firsts.find((c) => c.id === ord[3].id)!, "gone", { _tag: "Dead" })).toBe("dead")
      expect(yield* repo.fail(firsts.find((c) => c.id === ord[5].id)!, "later", { _tag: "Retry", delay: "1 hour" })).toBe("retried")
      const [c1, d1] = yield* add("ord", ["c", "d"])
      yield* repo.pauseGroup("ord", "d")
      // A blocked item long due does not make the ready age; c's, due a minute ago, does.
      yield* setRow(ord[1].id, { run_at: now - 600_000 })
      yield* setRow(c1.id, { run_at: now - 60_000 })
      yield* setRow(d1.id, { run_at: now - 900_000 })
      // Unordered, two at a time: one running, three due, so one more may start and two wait.
      yield* repo.declarePerGroup("un", { concurrency: 2 })
      yield* add("un", ["x", "x", "x", "x"])
      expect((yield* take("un", 1)).length).toBe(1)
      // A rate of one start an hour, spent: both due items wait, none is ready.
      yield* repo.declarePerGroup("rated", { concurrency: 5, rate: { limit: 1, period: "1 hour" } })
      yield* add("rated", ["r", "r", "r"])
      expect((yield* take("rated")).length).toBe(1)
      const rows = yield* repo.groupsDue
      // ord: a2 and a3 behind a running a1, b2 held by dead b1, e2 behind e1's retry, d1 paused.
      expect(rows.map((r) => [r.kind, r.blocked, r.oldestReadyAgeMs === null])).toEqual([
        ["ord", 5, false],
        ["rated", 2, true],
        ["un", 2, false]
      ])
      expect(rows[0].oldestReadyAgeMs).toBeGreaterThanOrEqual(60_000)
      expect(rows[0].oldestReadyAgeMs).toBeLessThan(70_000)
      expect((yield* repo.oldestDue).find((r) => r.kind === "ord")!.ageMs).toBeGreaterThanOrEqual(900_000)
      // d resumed: d1 is ready (the oldest now); b1 retried: ready at b's head, b2 still behind it.
      yield* repo.resumeGroup("ord", "d")
      expect(yield* repo.retryDead({ ids: [ord[3].id] })).toEqual([ord[3].id])
      const after = (yield* repo.groupsDue)[0]
      expect(after.blocked).toBe(4)
      expect(after.oldestReadyAgeMs).toBeGreaterThanOrEqual(900_000)
    })))
}

const retried = (backend: Backend) => {
  it.live("retriedPerMinute: a retrying fail counts once per item in its minute and kind; dead, cancelled, snoozed and stale fails count nothing", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const before = yield* dbNow
      expect(yield* repo.retriedPerMinute(60)).toEqual([])
      yield* repo.enqueueMany([
        ...[1, 2, 3].map((i) => ({ kind: "mail", payload: i })),
        ...[1, 2].map((i) => ({ kind: "report", payload: i })),
        { kind: "spent", payload: 1, maxAttempts: 1 }
      ])
      const claims = yield* repo.claim({ worker: "w", limit: 10, lease: "1 minute", kinds: ["mail", "report"] })
      expect(claims.length).toBe(5)
      const [m1, m2, m3] = claims.filter((c) => c.kind === "mail")
      const [r1, r2] = claims.filter((c) => c.kind === "report")
      // One batch of mixed kinds and outcomes: three retries (two mail, one report), a dead, a cancel.
      expect(yield* repo.failMany([
        { claim: m1, error: "e", next: { _tag: "Retry", delay: "1 hour" } },
        { claim: r1, error: "e", next: { _tag: "Retry", delay: "1 hour" } },
        { claim: m2, error: "e", next: { _tag: "Retry", delay: "1 hour" } },
        { claim: m3, error: "e", next: { _tag: "Dead" } },
        { claim: r2, error: "e", next: { _tag: "Cancel" } }
      ])).toEqual(["retried", "retried", "retried", "dead", "cancelled"])
      // A retry asked for with no attempts left dies: not a retry.
      const [spent] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["spent"] })
      expect(yield* repo.fail(spent, "e", { _tag: "Retry", delay: 0 })).toBe("dead")
      // A snooze is not a retry; a stale fail (its claim taken over) changes nothing and counts nothing.
      const snoozed = yield* repo.enqueue("mail", "snoozed")
      const [s1] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["mail"] })
      expect(s1.id).toBe(snoozed.id)
      expect(yield* repo.snooze(s1, "1 hour")).toBe("snoozed")
      const stale = yield* repo.enqueue("mail", "stale")
      const [old] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["mail"] })
      yield* expireLease(stale.id)
      const [taken] = yield* repo.claim({ worker: "w2", limit: 1, lease: "1 minute", kinds: ["mail"] })
      expect([old.id, taken.id]).toEqual([stale.id, stale.id])
      expect(yield* repo.fail(old, "late", { _tag: "Retry", delay: 0 })).toBe("stale")
      // A keyed retry absorbed by its waiting twin is a retry too (the twin runs the work again).
      const keyed = yield* repo.enqueue("report", "keyed", { key: "k" })
      const [k1] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["report"] })
      expect(k1.id).toBe(keyed.id)
      yield* repo.enqueue("report", "twin", { key: "k" })
      expect(yield* repo.fail(k1, "e", { _tag: "Retry", delay: 0 })).toBe("absorbed")
      // The same item retried again counts again.
      yield* makeDue(m1.id)
      const [again] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: ["mail"] })
      expect(again.id).toBe(m1.id)
      expect(yield* repo.fail(again, "e", { _tag: "Retry", delay: "1 hour" })).toBe("retried")
      const after = yield* dbNow
      const rows = yield* repo.retriedPerMinute(60)
      const minute = (t: number) => Math.floor(t / 60_000) * 60_000
      for (const r of rows) {
        expect(r.minute).toBeGreaterThanOrEqual(minute(before))
        expect(r.minute).toBeLessThanOrEqual(minute(after))
      }
      const total = (kind: string) => rows.filter((r) => r.kind === kind).reduce((n, r) => n + r.count, 0)
      expect([total("mail"), total("report"), total("spent")]).toEqual([3, 2, 0])
      expect(rows.every((r) => r.kind === "mail" || r.kind === "report")).toBe(true)
      expect(yield* Effect.flip(repo.retriedPerMinute(0))).toMatchObject({ _tag: "InvalidInput", field: "minutes" })
    })))

  it.live("retriedPerMinute: counts older than the window are left out; prune deletes those older than a day", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const sql = yield* SqlClient.SqlClient
      const now = Math.floor((yield* dbNow) / 60_000)
      for (const [ago, n] of [[10, 2], [2 * 60, 3], [25 * 60, 4], [3 * 24 * 60, 5]] as const) {
        const marks = backend.name === "pg" ? "$1, $2, $3" : "?, ?, ?"
        yield* unsafe(`INSERT INTO docket_minute_counts (minute, kind, retried) VALUES (${marks})`, [now - ago, "mail", n])
      }
      expect(yield* repo.retriedPerMinute(60)).toEqual([{ minute: (now - 10) * 60_000, kind: "mail", count: 2 }])
      expect((yield* repo.retriedPerMinute(24 * 60)).map((r) => r.count)).toEqual([3, 2])
      yield* repo.prune
      const left = yield* unsafe<{ minute: number | string }>("SELECT minute FROM docket_minute_counts ORDER BY minute")
      expect(left.map((r) => Number(r.minute))).toEqual([now - 2 * 60, now - 10])
    })))
}

const totals = (backend: Backend) => {
  it.live("totals never fall: pruning, retrying and deleting dead items and pruning retry counts keep each count; retention 0 counts nothing", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const sql = yield* SqlClient.SqlClient
      const totals = Effect.map(repo.totals, (rows) => Object.fromEntries(rows.map((r) => [`${r.kind}/${r.what}`, r.count])))
      expect(yield* repo.totals).toEqual([])
      const seen: Array<Record<string, number>> = []
      const check = (expected: Record<string, number>) =>
        Effect.gen(function*() {
          const now = yield* totals
          expect(now).toEqual(expected)
          seen.push(now)
        })
      // Two done, one dead, one cancelled, one retried attempt.
      yield* repo.enqueueMany([1, 2].map((i) => ({ kind: "mail", payload: i })))
      yield* repo.completeMany(yield* repo.claim({ worker: "w", limit: 2, lease: "1 minute" }))
      yield* repo.enqueue("mail", "dies")
      const dead = yield* killOne(repo, "mail", "boom")
      yield* repo.enqueue("mail", "retries")
      const [again] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute" })
      expect(yield* repo.fail(again, "later", { _tag: "Retry", delay: 0 })).toBe("retried")
      const stop = yield* repo.enqueue("mail", "stop")
      expect(yield* repo.cancel([stop.id])).toEqual(["cancelled"])
      yield* check({ "mail/done": 2, "mail/dead": 1, "mail/cancelled": 1, "mail/retried": 1 })
      // Everything finished two days ago and the retry three days ago: pruned, still counted.
      yield* ageFinished(2 * 86_400_000)
      yield* unsafe("UPDATE docket_minute_counts SET minute = minute - 4320")
      expect(yield* repo.prune).toEqual({ done: 2, cancelled: 1, dead: 0 })
      expect(yield* countAll).toBe(2)
      expect(yield* unsafe("SELECT kind FROM docket_minute_counts")).toEqual([])
      yield* check({ "mail/done": 2, "mail/dead": 1, "mail/cancelled": 1, "mail/retried": 1 })
      // The dead one retried (it left dead: still one death), dies again (two), then is deleted.
      expect(yield* repo.retryDead({ ids: [dead] })).toEqual([dead])
      yield* check({ "mail/done": 2, "mail/dead": 1, "mail/cancelled": 1, "mail/retried": 1 })
      const retried = (yield* repo.claim({ worker: "w", limit: 2, lease: "1 minute", kinds: ["mail"] })).find((c) => c.id === dead)!
      expect(yield* repo.fail(retried, "boom again", { _tag: "Dead" })).toBe("dead")
      yield* check({ "mail/done": 2, "mail/dead": 2, "mail/cancelled": 1, "mail/retried": 1 })
      expect(yield* repo.deleteDead({ ids: [dead] })).toEqual([dead])
      yield* check({ "mail/done": 2, "mail/dead": 2, "mail/cancelled": 1, "mail/retried": 1 })
      // Never fell between two reads, for any count.
      for (let i = 1; i < seen.length; i++) {
        for (const [key, n] of Object.entries(seen[i - 1])) expect(seen[i][key] ?? 0).toBeGreaterThanOrEqual(n)
      }
    })))

  it.live("totals: a done item a retention of 0 deletes at its complete is not counted (nothing is kept)", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.enqueue("fast", 1)
      yield* repo.completeMany(yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute" }))
      expect(yield* repo.totals).toEqual([])
    }), { retention: { done: 0 } }).pipe(Effect.timeout("30 seconds")))
}

const searchAndRunNow = (backend: Backend) => {
  it.live("searchItems: by state, kind, key and text in the payload or the last error, newest first, paged by cursor", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const ids: Array<number> = []
      for (let i = 0; i < 7; i++) {
        ids.push((yield* repo.enqueue(i % 2 === 0 ? "mail" : "report", { to: `User${i}@Example.com` }, { key: `k${i}` })).id)
      }
      const dead = yield* killOne(repo, "report", "SMTP said: Mailbox FULL")
      expect((yield* repo.searchItems({ key: "k3" })).items.map((i) => i.id)).toEqual([ids[3]])
      expect((yield* repo.searchItems({ text: "user4@example" })).items.map((i) => i.id)).toEqual([ids[4]])
      expect((yield* repo.searchItems({ text: "mailbox full" })).items.map((i) => i.id)).toEqual([dead])
      expect((yield* repo.searchItems({ state: "dead" })).items.map((i) => i.id)).toEqual([dead])
      expect((yield* repo.searchItems({ state: "waiting", kind: "report" })).items.map((i) => i.id)).toEqual(
        [ids[5], ids[3], ids[1]].filter((id) => id !== dead)
      )
      // Pages of 2, newest first, every item once.
      const seen: Array<number> = []
      let cursor: string | undefined
      for (let page = 0; page < 10; page++) {
        const got = yield* repo.searchItems({ text: "example.com", limit: 2, cursor })
        seen.push(...got.items.map((i) => i.id))
        if (got.cursor === null) break
        cursor = got.cursor
      }
      expect(seen).toEqual([...ids].reverse())
      // A cursor of another search is refused; bad filters are InvalidInput.
      const first = yield* repo.searchItems({ text: "example.com", limit: 2 })
      expect(yield* Effect.flip(repo.searchItems({ text: "other", cursor: first.cursor! }))).toMatchObject({ field: "cursor" })
      expect(yield* Effect.flip(repo.searchItems({ text: "" }))).toMatchObject({ field: "text" })
      expect(yield* Effect.flip(repo.searchItems({ state: "nope" as "dead" }))).toMatchObject({ field: "state" })
      // Text is a parameter, never SQL or a LIKE pattern.
      expect((yield* repo.searchItems({ text: "%' OR 1=1 --" })).items).toEqual([])
      expect((yield* repo.searchItems({ text: "_" })).items).toEqual([])
    })))

  it.live("searchItems reads at most scanCap rows a page: a rare match is found on a later page through a cursor", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const needle = yield* repo.enqueue("mail", { needle: true })
      const cap = (yield* repo.searchItems({})).scanCap
      for (let done = 0; done < cap + 10; done += 1000) {
        yield* repo.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ kind: "mail", payload: { hay: done + i } })))
      }
      const first = yield* repo.searchItems({ text: "needle" })
      expect(first.items).toEqual([])
      expect(first.cursor).not.toBeNull()
      const second = yield* repo.searchItems({ text: "needle", cursor: first.cursor! })
      expect(second.items.map((i) => i.id)).toEqual([needle.id])
      expect(second.cursor).toBeNull()
    })), 60_000)

  it.live("runNow: scheduled items become due now; due, running and finished ones and unknown ids are left alone", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const later = yield* repo.enqueue("mail", 1, { delay: "1 hour" })
      const due = yield* repo.enqueue("mail", 2)
      const before = yield* dbNow
      expect(yield* repo.runNow([later.id, due.id, 999_999])).toEqual([later.id])
      const item = Option.getOrThrow(yield* repo.get(later.id))
      expect(item.runAt).toBeGreaterThanOrEqual(before - 5)
      expect(item.runAt).toBeLessThanOrEqual((yield* dbNow) + 5)
      expect(yield* repo.runNow([later.id])).toEqual([])
      const claims = yield* repo.claim({ worker: "w", limit: 10, lease: "1 minute" })
      expect(claims.map((c) => c.id).sort((a, b) => a - b)).toEqual([later.id, due.id])
      expect(yield* Effect.flip(repo.runNow([]))).toMatchObject({ field: "ids" })
      expect(yield* Effect.flip(repo.runNow([0]))).toMatchObject({ field: "ids" })
    })))
}

/** A raw connection of the repository's own pool, held for the scope; its statements run one by one. */
const heldConnection = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const schema = yield* PgSchema.current
  const connection = yield* sql.reserve
  const run = (text: string) => connection.executeUnprepared(schema.qualify(text), [], undefined)
  const [{ pid }] = yield* run("SELECT pg_backend_pid() AS pid")
  return { pid: Number(pid), run }
})

const horizon = (backend: Backend) => {
  it.live("horizon: a bad threshold is an InvalidInput on horizon naming its part, nothing run", () =>
    run(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const age = yield* expectInvalid(repo.horizon({ age: -1 }), "horizon")
      expect(age.reason).toMatch(/^age must be from 0 to /)
      const xids = yield* expectInvalid(repo.horizon({ transactions: 1.5 }), "horizon")
      expect(xids.reason).toMatch(/^transactions must be an integer from 0 to 2147483647/)
    })))

  if (backend.name === "sqlite") {
    it.live("horizon: SQLite has none (nothing to hold back)", () =>
      run(backend, Effect.gen(function*() {
        expect(yield* (yield* Repo).horizon({ age: 0, transactions: 0 })).toEqual(Option.none())
      })))
    return
  }

  it.live("horizon: a REPEATABLE READ transaction that has read, and one that wrote, are named once open past the age; gone at their end", () =>
    run(backend, Effect.scoped(Effect.gen(function*() {
      const repo = yield* Repo
      const reader = yield* heldConnection
      const writer = yield* heldConnection
      const sessions = (age: Duration.DurationInput) =>
        Effect.map(repo.horizon({ age }), (report) => Option.getOrThrow(report).holders.filter((h) => h._tag === "Session"))
      expect(yield* sessions("1 millis")).toEqual([])
      yield* reader.run("BEGIN ISOLATION LEVEL REPEATABLE READ")
      yield* reader.run("SELECT count(*) AS n FROM docket_items\n  WHERE state = 'waiting'")
      // READ COMMITTED, idle: no snapshot, but a transaction id (as a write takes) that holds the horizon.
      yield* writer.run("BEGIN")
      yield* writer.run("SELECT txid_current()")
      yield* Effect.sleep("20 millis")
      const report = Option.getOrThrow(yield* repo.horizon({ age: "10 millis", transactions: 5 }))
      expect(report).toMatchObject({ ageMs: 10, transactions: 5 })
      const held = report.holders.filter((h) => h._tag === "Session")
      expect(held.map((h) => h.pid).sort()).toEqual([reader.pid, writer.pid].sort())
      const r = held.find((h) => h.pid === reader.pid)!
      // (Its first line, as Docket named the table in its schema.)
      const query = (yield* PgSchema.current).qualify("SELECT count(*) AS n FROM docket_items")
      expect(r).toMatchObject({ state: "idle in transaction", backendType: "client backend", query })
      expect(r.transactionAgeMs).toBeGreaterThanOrEqual(10)
      expect(r.transactionStart).toBeLessThanOrEqual((yield* dbNow) - 10)
      expect(held.find((h) => h.pid === writer.pid)!.query).toBe("SELECT txid_current()")
      // Open less long than the age: not named.
      expect(yield* sessions("1 hour")).toEqual([])
      yield* reader.run("COMMIT")
      yield* writer.run("ROLLBACK")
      expect(yield* sessions("1 millis")).toEqual([])
    }))))
}

export const insightsSuite = (backend: Backend) => {
  describe("the dashboard's read model", () => {
    oldestAndFinished(backend)
    groupsDue(backend)
    retried(backend)
    totals(backend)
    searchAndRunNow(backend)
    horizon(backend)
  })
}
