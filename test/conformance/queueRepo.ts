/**
 * The QueueRepo conformance suite: written once, run against every backend
 * (test/queueRepo.sqlite.test.ts, test/queueRepo.pg.test.ts).
 *
 * Rules: real databases only; time is moved by editing rows (setRow,
 * expireLease, makeDue), never by sleeping; every test checks what is stored
 * (get, counts), not only what an operation returned.
 */
import { SqlClient } from "@effect/sql"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option } from "effect"
import * as Database from "../../src/Database.js"
import { InvalidInput, type InvalidField, StorageError } from "../../src/Errors.js"
import * as Migrations from "../../src/Migrations.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, countState, expireLease, makeDue, repoLayer, setRow } from "../support/db.js"
import { attemptsConformance } from "./attempts.js"
import { cancelConformance } from "./cancel.js"
import { historyConformance } from "./history.js"
import { kindsConformance } from "./kinds.js"
import { dbNow, expectAround, withRepo } from "./harness.js"
import { recurringConformance } from "./recurring.js"
import { snoozeConformance } from "./snooze.js"
import { upgradeConformance } from "./upgrade.js"

const Repo = QueueRepo.QueueRepo

/** The item, which must exist. */
const getItem = (id: number) =>
  Effect.flatMap(Repo, (repo) => repo.get(id)).pipe(
    Effect.map((item) => {
      expect(Option.isSome(item), `item ${id} exists`).toBe(true)
      return Option.getOrThrow(item)
    })
  )

/** Fails the test unless the effect fails with InvalidInput on `field`. */
const expectInvalid = <A, E, R>(effect: Effect.Effect<A, E, R>, field: InvalidField) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    expect(error).toBeInstanceOf(InvalidInput)
    expect((error as InvalidInput)._tag).toBe("InvalidInput")
    expect((error as InvalidInput).field).toBe(field)
    return error as InvalidInput
  })

/** Fails the test unless the effect fails with a StorageError. */
const expectStorageError = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    expect(error).toBeInstanceOf(StorageError)
    expect((error as StorageError)._tag).toBe("StorageError")
    return error as StorageError
  })

/** Drops the queue table (on PostgreSQL with the claim function that returns its rows). */
const dropTable = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    pg: () => sql.unsafe("DROP TABLE docket_items CASCADE"),
    orElse: () => sql.unsafe("DROP TABLE docket_items")
  }))

/** Every migration's id (migrations/{pg,sqlite} have the same numbers). */
const ALL_MIGRATIONS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]

/** Rows in the migrations bookkeeping table. */
const migrationRows = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe<{ migration_id: number | string }>(
    `SELECT migration_id FROM ${Migrations.TABLE} ORDER BY migration_id`
  )).pipe(Effect.map((rows) => rows.map((r) => Number(r.migration_id))))

const TOP = 2_000_000_000

const MIGRATE_PROCESS = fileURLToPath(new URL("../support/migrateProcess.ts", import.meta.url))

interface RacerResult {
  readonly applied?: ReadonlyArray<number>
  readonly error?: string
  readonly code: number | null
  readonly stderr: string
}

/**
 * Starts `count` migrator processes on one database, waits until every one is
 * connected, then lets them all migrate at once (a barrier, not a sleep).
 */
const racingMigrators = (url: string, count: number) =>
  Effect.tryPromise(() => {
    const children = Array.from({ length: count }, () =>
      spawn(process.execPath, ["--import", "tsx", MIGRATE_PROCESS, url], { stdio: ["pipe", "pipe", "pipe"] }))
    let ready = 0
    const results = children.map((child) =>
      new Promise<RacerResult>((resolve, reject) => {
        let out = ""
        let stderr = ""
        child.stdout.on("data", (chunk: Buffer) => {
          const before = out
          out += chunk.toString("utf8")
          if (!before.includes("ready\n") && out.includes("ready\n") && ++ready === count) {
            for (const c of children) c.stdin.write("go\n")
          }
        })
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString("utf8")
        })
        child.on("error", reject)
        child.on("exit", (code) => {
          // A racer that died before the barrier: stop the others rather than leave them waiting.
          if (ready < count) for (const c of children) c.kill("SIGKILL")
          const last = out.trim().split("\n").filter((line) => line.startsWith("{")).pop()
          resolve({ ...(last === undefined ? {} : JSON.parse(last)), code, stderr })
        })
      })
    )
    return Promise.all(results).finally(() => {
      for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
    })
  })

export const queueRepoConformance = (backend: Backend) => {
  const lease = "30 seconds"
  const run = <A, E>(
    program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>,
    options: QueueRepo.Options = {}
  ) => withRepo(backend, program, options)

  /** Enqueues an item and takes it to dead (claimed alone, failed with Dead). */
  const deadItem = (kind: string, key?: string, error = "broken") =>
    Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue(kind, { dead: true }, { key, priority: TOP })
      expect(added._tag).toBe("Enqueued")
      const [claim] = yield* repo.claim({ worker: "killer", limit: 1, lease, kinds: [kind] })
      expect(claim.id).toBe(added.id)
      expect(yield* repo.fail(claim, error, { _tag: "Dead" })).toBe("dead")
      return added.id
    })

  describe("enqueue and claim", () => {
    it.live("a claimed item is leased: a second claimer skips it until the lease runs out", () =>
      run(Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const added = yield* repo.enqueue("email.send", { to: "a@example.com" })
        expect(added._tag).toBe("Enqueued")
        const [first] = yield* repo.claim({ worker: "w1", limit: 10, lease })
        expect(first.id).toBe(added.id)
        expect(first.attempt).toBe(1)
        expect(JSON.parse(first.payloadJson)).toEqual({ to: "a@example.com" })
        expect(yield* repo.claim({ worker: "w2", limit: 10, lease })).toEqual([])
        yield* expireLease(first.id)
        const [again] = yield* repo.claim({ worker: "w2", limit: 10, lease })
        expect(again.id).toBe(first.id)
        expect(again.attempt).toBe(2)
        expect(again.token).not.toBe(first.token)
        expect(yield* repo.get(first.id)).toSatisfy(Option.isSome)
      })))

    it.live("the reference's own test: once per key, leased, backoff, dead after the last attempt, dead holds no key", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const payload = { repo_id: 7 }
        const added = yield* repo.enqueue("mirror.refresh", payload, { key: "7" })
        expect(added._tag).toBe("Enqueued")
        expect(yield* repo.enqueue("mirror.refresh", payload, { key: "7" })).toEqual({ _tag: "Deduplicated", id: added.id })

        const got = yield* repo.claim({ worker: "a", limit: 10, lease: "60 seconds" })
        expect(got.map((c) => [c.id, c.attempt, c.worker])).toEqual([[added.id, 1, "a"]])
        expect(yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })).toEqual([])

        // Backoff: waiting again, scheduled a minute out on the database's clock, not claimable.
        const before = yield* dbNow
        expect(yield* repo.fail(got[0], "the disk is full", { _tag: "Retry", delay: "1 minute" })).toBe("retried")
        const after = yield* dbNow
        const waiting = yield* getItem(added.id)
        expect(waiting.state).toBe("waiting")
        expect(waiting.lastError).toBe("the disk is full")
        expect(waiting.attempts).toBe(1)
        expect(waiting.claimedBy).toBeNull()
        expect(waiting.leaseUntil).toBeNull()
        expectAround(waiting.runAt, before + 60_000, after + 60_000, 50)
        expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 1, running: 0, dead: 0 })
        expect(yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })).toEqual([])

        // Due: claimable again, attempt 2, with the previous error.
        yield* makeDue(added.id)
        const [second] = yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })
        expect(second.id).toBe(added.id)
        expect(second.attempt).toBe(2)
        expect(second.lastError).toBe("the disk is full")
        expect(yield* repo.fail(second, "still full", { _tag: "Retry", delay: "2 minutes" })).toBe("retried")
        expect(yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })).toEqual([])

        // As the reference does: jump to the last attempt (default 8) by editing the row.
        yield* setRow(added.id, { run_at: 0, attempts: QueueRepo.DEFAULT_MAX_ATTEMPTS - 1 })
        const [last] = yield* repo.claim({ worker: "b", limit: 10, lease: "60 seconds" })
        expect(last.attempt).toBe(QueueRepo.DEFAULT_MAX_ATTEMPTS)
        expect(last.maxAttempts).toBe(QueueRepo.DEFAULT_MAX_ATTEMPTS)
        // The last attempt: a Retry still ends dead.
        expect(yield* repo.fail(last, "still full", { _tag: "Retry", delay: "30 seconds" })).toBe("dead")
        const dead = yield* getItem(added.id)
        expect(dead.state).toBe("dead")
        expect(dead.lastError).toBe("still full")
        expect(dead.attempts).toBe(QueueRepo.DEFAULT_MAX_ATTEMPTS)
        expect(yield* repo.stats).toMatchObject({ due: 0, scheduled: 0, running: 0, dead: 1 })
        expect(yield* repo.claim({ worker: "b", limit: 10, lease })).toEqual([])

        // A dead item does not hold its key.
        const again = yield* repo.enqueue("mirror.refresh", payload, { key: "7" })
        expect(again._tag).toBe("Enqueued")
        expect(again.id).not.toBe(added.id)
        expect(yield* countState("waiting")).toBe(1)
        expect(yield* countState("dead")).toBe(1)
      })))

    it.live("claim order: priority first, then run-after, then id; the limit is respected", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const t = Date.now() - 60_000
        const a = yield* repo.enqueue("job", "a", { runAt: t + 1_000 })
        const b = yield* repo.enqueue("job", "b", { runAt: t + 3_000, priority: 5 })
        const c = yield* repo.enqueue("job", "c", { runAt: new Date(t + 2_000), priority: 5 })
        const d = yield* repo.enqueue("job", "d", { runAt: t + 1_000 })
        const e = yield* repo.enqueue("job", "e", { runAt: t, priority: -3 })
        const f = yield* repo.enqueue("job", "f", { runAt: t + 500, priority: 5 })
        const expected = [f.id, c.id, b.id, a.id, d.id, e.id]
        // One at a time: each claim must pick the first due item in claim order.
        const oneByOne: Array<number> = []
        for (let i = 0; i < 3; i++) {
          const claims = yield* repo.claim({ worker: "w", limit: 1, lease })
          expect(claims).toHaveLength(1)
          oneByOne.push(claims[0].id)
        }
        expect(oneByOne).toEqual(expected.slice(0, 3))
        const rest = yield* repo.claim({ worker: "w", limit: 2, lease })
        expect(rest.map((r) => r.id)).toEqual(expected.slice(3, 5))
        const last = yield* repo.claim({ worker: "w", limit: 100, lease })
        expect(last.map((r) => r.id)).toEqual([e.id])
        expect(yield* countState("running")).toBe(6)
      })))

    it.live("claim order across priorities skips the items not yet due of each, and an empty claim takes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const t = Date.now() - 60_000
        const later = Date.now() + 3_600_000
        // Each priority holds items not yet due after (and before, by id) its due ones:
        // the claim walks priorities 7, 3, 0, -2 and must take only the due ones, in order.
        yield* repo.enqueueMany([7, 3, 0, -2].map((priority) => ({ kind: "job", payload: `later ${priority}`, priority, runAt: later })))
        const due = yield* repo.enqueueMany([
          { kind: "job", payload: "p3 second", priority: 3, runAt: t + 2_000 },
          { kind: "job", payload: "p0", priority: 0, runAt: t },
          { kind: "job", payload: "p3 first", priority: 3, runAt: t + 1_000 },
          { kind: "job", payload: "p-2", priority: -2, runAt: t }
        ])
        yield* repo.enqueueMany([7, 3, 0, -2].map((priority) => ({ kind: "job", payload: `later too ${priority}`, priority, runAt: later + 1 })))
        const ids = due.map((r) => r.id)
        const first = yield* repo.claim({ worker: "w", limit: 2, lease })
        expect(first.map((c) => c.id)).toEqual([ids[2], ids[0]])
        const rest = yield* repo.claim({ worker: "w", limit: 10, lease })
        expect(rest.map((c) => c.id)).toEqual([ids[1], ids[3]])
        expect(yield* repo.claim({ worker: "w", limit: 10, lease })).toEqual([])
        expect(yield* countState("waiting")).toBe(8)
      })))

    it.live("claim order past 64 priorities: the due items of every priority, in order, none not yet due", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const t = Date.now() - 60_000
        const later = Date.now() + 3_600_000
        // 70 priorities hold only items not yet due; below them, and among them, due ones.
        yield* repo.enqueueMany(Array.from({ length: 70 }, (_, i) => ({ kind: "job", payload: `later ${i}`, priority: 200 - i, runAt: later })))
        const due = yield* repo.enqueueMany(Array.from({ length: 70 }, (_, i) => ({ kind: "job", payload: `due ${i}`, priority: 100 - i, runAt: t + i })))
        const bottom = yield* repo.enqueue("job", "due at the bottom", { priority: -5, runAt: t })
        const first = yield* repo.claim({ worker: "w", limit: 3, lease })
        expect(first.map((c) => c.id)).toEqual(due.slice(0, 3).map((r) => r.id))
        const rest = yield* repo.claim({ worker: "w", limit: 100, lease })
        expect(rest.map((c) => c.id)).toEqual([...due.slice(3).map((r) => r.id), bottom.id])
        expect(yield* repo.claim({ worker: "w", limit: 100, lease })).toEqual([])
        expect(yield* countState("waiting")).toBe(70)
      })))

    it.live("an item whose lease ran out is due again, and takes its place in claim order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const low = yield* repo.enqueue("job", "low", { priority: 1 })
        const [claimed] = yield* repo.claim({ worker: "w1", limit: 1, lease })
        expect(claimed.id).toBe(low.id)
        const high = yield* repo.enqueue("job", "high", { priority: 9 })
        yield* expireLease(low.id)
        // Both are due: the higher priority goes first.
        const [first] = yield* repo.claim({ worker: "w2", limit: 1, lease })
        expect(first.id).toBe(high.id)
        const [second] = yield* repo.claim({ worker: "w2", limit: 1, lease })
        expect(second.id).toBe(low.id)
        expect(second.attempt).toBe(2)
        expect(second.worker).toBe("w2")
        expect((yield* getItem(low.id)).claimedBy).toBe("w2")
      })))

    it.live("a batch takes expired and waiting items together, up to the limit, with the kinds filter", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueueMany([
          { kind: "a", payload: "a1", priority: 3 },
          { kind: "a", payload: "a2", priority: 1 },
          { kind: "b", payload: "b1", priority: 2 }
        ])
        const first = yield* repo.claim({ worker: "w1", limit: 3, lease })
        expect(first.map((c) => c.payloadJson)).toEqual(["\"a1\"", "\"b1\"", "\"a2\""])
        for (const c of first) yield* expireLease(c.id)
        yield* repo.enqueueMany([
          { kind: "a", payload: "a3", priority: 2 },
          { kind: "b", payload: "b2", priority: 5 }
        ])
        // Only kind a: the expired a1 and a2 and the waiting a3, in claim order, limit 2.
        const onlyA = yield* repo.claim({ worker: "w2", limit: 2, lease, kinds: ["a"] })
        expect(onlyA.map((c) => c.payloadJson)).toEqual(["\"a1\"", "\"a3\""])
        expect(onlyA.map((c) => c.attempt)).toEqual([2, 1])
        const rest = yield* repo.claim({ worker: "w2", limit: 10, lease })
        expect(rest.map((c) => c.payloadJson)).toEqual(["\"b2\"", "\"b1\"", "\"a2\""])
        expect(yield* repo.claim({ worker: "w3", limit: 10, lease })).toEqual([])
      })))

    it.live("a claim counts the attempt, carries the item's fields and leases on the database's clock", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const added = yield* repo.enqueue("email.send", { n: 1 }, { key: "k1", priority: 4, maxAttempts: 5 })
        const before = yield* dbNow
        const [claim] = yield* repo.claim({ worker: "host:123", limit: 5, lease: "45 seconds" })
        const after = yield* dbNow
        expect(claim).toMatchObject({
          id: added.id,
          kind: "email.send",
          key: "k1",
          priority: 4,
          attempt: 1,
          maxAttempts: 5,
          worker: "host:123",
          lastError: null
        })
        expectAround(claim.leaseUntil, before + 45_000, after + 45_000, 50)
        const item = yield* getItem(added.id)
        expect(item).toMatchObject({ state: "running", attempts: 1, claimedBy: "host:123", leaseUntil: claim.leaseUntil })
      })))

    it.live("every claim has a fresh token; a release gives the attempt back", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [c1] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(yield* repo.release(c1)).toBe("released")
        const released = yield* getItem(c1.id)
        expect(released).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null, leaseUntil: null })
        const [c2] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(c2.id).toBe(c1.id)
        expect(c2.attempt).toBe(1)
        expect(c2.token).not.toBe(c1.token)
        yield* expireLease(c2.id)
        const [c3] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(c3.attempt).toBe(2)
        expect(new Set([c1.token, c2.token, c3.token]).size).toBe(3)
        // Only the latest token completes it.
        expect(yield* repo.complete(c1)).toBe(false)
        expect(yield* repo.complete(c2)).toBe(false)
        expect(yield* repo.complete(c3)).toBe(true)
        // Kept as done (default retention), who ran it kept; complete again is stale.
        expect(yield* getItem(c3.id)).toMatchObject({ state: "done", attempts: 2, claimedBy: "w", leaseUntil: null })
        expect(yield* repo.complete(c3)).toBe(false)
      })))

    it.live("the kinds filter claims only those kinds", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const a = yield* repo.enqueue("a.one", 1, { priority: 10 })
        const b = yield* repo.enqueue("b.two", 2)
        const c = yield* repo.enqueue("c.three", 3)
        const got = yield* repo.claim({ worker: "w", limit: 10, lease, kinds: ["b.two", "c.three"] })
        expect(got.map((g) => g.id).sort((x, y) => x - y)).toEqual([b.id, c.id])
        expect(yield* repo.claim({ worker: "w", limit: 10, lease, kinds: ["nothing.here"] })).toEqual([])
        expect((yield* getItem(a.id)).state).toBe("waiting")
        const rest = yield* repo.claim({ worker: "w", limit: 10, lease, kinds: [] })
        expect(rest).toEqual([])
        expect((yield* repo.claim({ worker: "w", limit: 10, lease })).map((g) => g.id)).toEqual([a.id])
      })))

    it.live("a scheduled item is not claimable until due; delay and runAt are stored", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const before = yield* dbNow
        const later = yield* repo.enqueue("job", {}, { delay: "10 minutes" })
        const after = yield* dbNow
        const at = Date.now() + 3_600_000
        const fixed = yield* repo.enqueue("job", {}, { runAt: new Date(at) })
        expectAround((yield* getItem(later.id)).runAt, before + 600_000, after + 600_000, 50)
        expect((yield* getItem(fixed.id)).runAt).toBe(at)
        expect(yield* repo.claim({ worker: "w", limit: 10, lease })).toEqual([])
        yield* makeDue(fixed.id)
        expect((yield* repo.claim({ worker: "w", limit: 10, lease })).map((c) => c.id)).toEqual([fixed.id])
      })))

    it.live("extend renews the lease from now; complete keeps the item as done, finished now, claimed_by kept", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "5 seconds" })
        const before = yield* dbNow
        expect(yield* repo.extend(claim, "10 minutes")).toBe(true)
        const after = yield* dbNow
        expectAround((yield* getItem(claim.id)).leaseUntil!, before + 600_000, after + 600_000, 50)
        expect(yield* repo.extendMany([claim], 60_000)).toEqual([true])
        const beforeDone = yield* dbNow
        expect(yield* repo.completeMany([claim])).toEqual([true])
        const afterDone = yield* dbNow
        const done = yield* getItem(claim.id)
        expect(done).toMatchObject({ state: "done", claimedBy: "w", leaseUntil: null, result: null, errors: [] })
        expectAround(done.finishedAt!, beforeDone, afterDone, 50)
        expect(yield* countAll).toBe(1)
        expect(yield* countState("done")).toBe(1)
        // Nothing claims a done item.
        expect(yield* repo.claim({ worker: "w", limit: 1, lease })).toEqual([])
      })))

    it.live("a fail with Dead is dead at once, whatever attempts remain", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("no.such.kind", {}, { maxAttempts: 8 })
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(yield* repo.fail(claim, "unknown kind", { _tag: "Dead" })).toBe("dead")
        expect(yield* getItem(claim.id)).toMatchObject({ state: "dead", attempts: 1, lastError: "unknown kind" })
        expect(yield* repo.claim({ worker: "w", limit: 1, lease })).toEqual([])
      })))

    it.live("batch operations apply per item, in input order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueueMany([0, 1, 2, 3, 4, 5].map((n) => ({ kind: "job", payload: n, priority: 10 - n })))
        const claims = yield* repo.claim({ worker: "w", limit: 6, lease })
        expect(claims.map((c) => JSON.parse(c.payloadJson))).toEqual([0, 1, 2, 3, 4, 5])
        const [c0, c1, c2, c3, c4, c5] = claims
        expect(yield* repo.completeMany([c0, c1])).toEqual([true, true])
        expect(yield* repo.completeMany([c0, c2])).toEqual([false, true])
        expect(yield* repo.failMany([
          { claim: c3, error: "x", next: { _tag: "Retry", delay: "1 hour" } },
          { claim: c4, error: "y", next: { _tag: "Dead" } }
        ])).toEqual(["retried", "dead"])
        expect(yield* repo.releaseMany([c5, c3])).toEqual(["released", "stale"])
        expect(yield* repo.extendMany([c5, c4], "1 minute")).toEqual([false, false])
        expect(yield* repo.completeMany([])).toEqual([])
        expect(yield* repo.failMany([])).toEqual([])
        expect(yield* repo.releaseMany([])).toEqual([])
        expect(yield* repo.extendMany([], "1 minute")).toEqual([])
        expect(yield* repo.stats).toMatchObject({ due: 1, scheduled: 1, running: 0, dead: 1 })
      })))
  })

  describe("dedupe", () => {
    it.live("same kind and key while waiting: Deduplicated with the waiting id; another kind is separate", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const first = yield* repo.enqueue("mirror.refresh", { n: 1 }, { key: "repo-7" })
        expect(first._tag).toBe("Enqueued")
        const second = yield* repo.enqueue("mirror.refresh", { n: 2 }, { key: "repo-7", priority: 9 })
        expect(second).toEqual({ _tag: "Deduplicated", id: first.id })
        const other = yield* repo.enqueue("email.send", { n: 3 }, { key: "repo-7" })
        expect(other._tag).toBe("Enqueued")
        expect(other.id).not.toBe(first.id)
        const unkeyed = yield* repo.enqueue("mirror.refresh", { n: 4 })
        expect(unkeyed._tag).toBe("Enqueued")
        expect(yield* countAll).toBe(3)
        // The waiting item is kept as it was.
        expect(yield* getItem(first.id)).toMatchObject({ payload: { n: 1 }, priority: 0 })
      })))

    it.live("an enqueue while the keyed item RUNS is kept, and runs after it (not beside it)", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const first = yield* repo.enqueue("mirror.refresh", { push: 1 }, { key: "repo-7" })
        const [running] = yield* repo.claim({ worker: "w1", limit: 10, lease })
        expect(running.id).toBe(first.id)
        const second = yield* repo.enqueue("mirror.refresh", { push: 2 }, { key: "repo-7" })
        expect(second._tag).toBe("Enqueued")
        expect(second.id).not.toBe(first.id)
        // A third enqueue finds the waiting twin.
        expect(yield* repo.enqueue("mirror.refresh", { push: 3 }, { key: "repo-7" })).toEqual({
          _tag: "Deduplicated",
          id: second.id
        })
        // Not claimable while the running one holds a live lease (an unrelated item is).
        const other = yield* repo.enqueue("mirror.refresh", { other: true }, { key: "repo-8" })
        expect((yield* repo.claim({ worker: "w2", limit: 10, lease })).map((c) => c.id)).toEqual([other.id])
        expect(yield* repo.claim({ worker: "w2", limit: 10, lease })).toEqual([])
        // Extending the running one keeps it blocked.
        expect(yield* repo.extend(running, "1 minute")).toBe(true)
        expect(yield* repo.claim({ worker: "w2", limit: 10, lease })).toEqual([])
        expect(yield* repo.complete(running)).toBe(true)
        const [next] = yield* repo.claim({ worker: "w2", limit: 10, lease })
        expect(next.id).toBe(second.id)
        expect(JSON.parse(next.payloadJson)).toEqual({ push: 2 })
      })))

    it.live("a waiting twin of a running item whose lease ran out is due", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("mirror.refresh", 1, { key: "k" })
        const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
        const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k", priority: 5 })
        expect(yield* repo.claim({ worker: "w2", limit: 1, lease })).toEqual([])
        yield* expireLease(running.id)
        const [got] = yield* repo.claim({ worker: "w2", limit: 1, lease })
        expect(got.id).toBe(twin.id)
      })))

    it.live("a failed keyed item going back to waiting while a twin waits is absorbed", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const first = yield* repo.enqueue("mirror.refresh", 1, { key: "k" })
        const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
        const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k" })
        expect(yield* repo.fail(running, "oops", { _tag: "Retry", delay: "1 second" })).toBe("absorbed")
        expect(yield* repo.get(first.id)).toEqual(Option.none())
        expect(yield* countAll).toBe(1)
        expect(yield* countState("waiting")).toBe(1)
        expect((yield* getItem(twin.id)).state).toBe("waiting")
        // The outcome is final: the stale claim changes nothing more.
        expect(yield* repo.fail(running, "oops", { _tag: "Retry", delay: 0 })).toBe("stale")
      })))

    it.live("a failed keyed item going dead while a twin waits is dead (a dead item holds no key)", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("mirror.refresh", 1, { key: "k", maxAttempts: 1 })
        const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
        const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k" })
        expect(yield* repo.fail(running, "oops", { _tag: "Retry", delay: 0 })).toBe("dead")
        expect((yield* getItem(running.id)).state).toBe("dead")
        expect((yield* getItem(twin.id)).state).toBe("waiting")
      })))

    it.live("a released keyed item while a twin waits is absorbed", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const first = yield* repo.enqueue("mirror.refresh", 1, { key: "k" })
        const [running] = yield* repo.claim({ worker: "w1", limit: 1, lease })
        const twin = yield* repo.enqueue("mirror.refresh", 2, { key: "k" })
        expect(yield* repo.release(running)).toBe("absorbed")
        expect(yield* repo.get(first.id)).toEqual(Option.none())
        expect(yield* countAll).toBe(1)
        expect((yield* getItem(twin.id)).state).toBe("waiting")
      })))

    it.live("two running twins failed or released in one batch: the first waits, the second is absorbed", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        // Two running items with one key: the first's lease ran out, so its twin became due.
        const make = Effect.gen(function*() {
          const a = yield* repo.enqueue("mirror.refresh", "a", { key: "k" })
          const [ca] = yield* repo.claim({ worker: "w1", limit: 1, lease })
          expect(ca.id).toBe(a.id)
          const b = yield* repo.enqueue("mirror.refresh", "b", { key: "k", priority: 5 })
          yield* expireLease(a.id)
          const [cb] = yield* repo.claim({ worker: "w2", limit: 1, lease })
          expect(cb.id).toBe(b.id)
          const [ca2] = yield* repo.claim({ worker: "w2", limit: 1, lease })
          expect(ca2.id).toBe(a.id)
          return [ca2, cb] as const
        })
        const [fa, fb] = yield* make
        expect(yield* repo.failMany([
          { claim: fa, error: "e", next: { _tag: "Retry", delay: 0 } },
          { claim: fb, error: "e", next: { _tag: "Retry", delay: 0 } }
        ])).toEqual(["retried", "absorbed"])
        expect(yield* countAll).toBe(1)
        expect((yield* getItem(fa.id)).state).toBe("waiting")
        expect(yield* repo.get(fb.id)).toEqual(Option.none())
        // Finish the waiting one (kept as done: it holds no key), then the same with release.
        const [left] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(yield* repo.complete(left)).toBe(true)
        const [ra, rb] = yield* make
        expect(yield* repo.releaseMany([ra, rb])).toEqual(["released", "absorbed"])
        expect(yield* countState("waiting")).toBe(1)
        expect(yield* countState("done")).toBe(1)
        expect(yield* countAll).toBe(2)
        expect(yield* getItem(ra.id)).toMatchObject({ state: "waiting" })
      })))

    it.live("enqueueMany with duplicates in the batch: per-item results in input order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const held = yield* repo.enqueue("mirror.refresh", "held", { key: "held" })
        const results = yield* repo.enqueueMany([
          { kind: "mirror.refresh", payload: 0, key: "k" },
          { kind: "mirror.refresh", payload: 1 },
          { kind: "mirror.refresh", payload: 2, key: "k" },
          { kind: "email.send", payload: 3, key: "k" },
          { kind: "mirror.refresh", payload: 4, key: "held" },
          { kind: "mirror.refresh", payload: 5, key: "k2" },
          { kind: "email.send", payload: 6, key: "k" },
          { kind: "mirror.refresh", payload: 7, key: "k" }
        ])
        expect(results.map((r) => r._tag)).toEqual([
          "Enqueued",
          "Enqueued",
          "Deduplicated",
          "Enqueued",
          "Deduplicated",
          "Enqueued",
          "Deduplicated",
          "Deduplicated"
        ])
        expect(results[2].id).toBe(results[0].id)
        expect(results[4].id).toBe(held.id)
        expect(results[6].id).toBe(results[3].id)
        expect(results[7].id).toBe(results[0].id)
        const ids = [results[0].id, results[1].id, results[3].id, results[5].id]
        expect(new Set([...ids, held.id]).size).toBe(5)
        // Ids follow input order; each row holds its own payload.
        expect([...ids].sort((a, b) => a - b)).toEqual(ids)
        for (const [index, id] of [[0, ids[0]], [1, ids[1]], [3, ids[2]], [5, ids[3]]]) {
          expect((yield* getItem(id)).payload).toBe(index)
        }
        expect(yield* countAll).toBe(5)
      })))
  })

  describe("fencing", () => {
    // w1 claims; its lease runs out; w2 claims the item. w1's claim is stale.
    const lostLease = Effect.gen(function*() {
      const repo = yield* Repo
      const added = yield* repo.enqueue("job", { n: 1 }, { key: "k" })
      const [stale] = yield* repo.claim({ worker: "w1", limit: 1, lease })
      yield* expireLease(added.id)
      const [fresh] = yield* repo.claim({ worker: "w2", limit: 1, lease })
      expect(fresh.id).toBe(added.id)
      const before = yield* getItem(added.id)
      expect(before).toMatchObject({ state: "running", claimedBy: "w2", attempts: 2 })
      return { stale, fresh, before }
    })

    it.live("a stale complete returns false and changes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        expect(yield* repo.complete(stale)).toBe(false)
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.complete(fresh)).toBe(true)
      })))

    it.live("a stale fail returns stale and changes nothing (Retry or Dead)", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        expect(yield* repo.fail(stale, "late", { _tag: "Retry", delay: "1 minute" })).toBe("stale")
        expect(yield* repo.fail(stale, "late", { _tag: "Dead" })).toBe("stale")
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.fail(fresh, "real", { _tag: "Dead" })).toBe("dead")
      })))

    it.live("a stale extend returns false and changes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        expect(yield* repo.extend(stale, "1 hour")).toBe(false)
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.extend(fresh, "1 hour")).toBe(true)
      })))

    it.live("a stale release returns stale and changes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const { before, fresh, stale } = yield* lostLease
        // A twin waiting must not make the stale release delete the item either.
        yield* repo.enqueue("job", { twin: true }, { key: "k" })
        expect(yield* repo.release(stale)).toBe("stale")
        expect(yield* getItem(stale.id)).toEqual(before)
        expect(yield* repo.release(fresh)).toBe("absorbed")
      })))

    it.live("a claim on a completed item's id is stale even if the id could be reused", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", 1)
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(yield* repo.complete(claim)).toBe(true)
        const next = yield* repo.enqueue("job", 2)
        expect(next.id).not.toBe(claim.id)
        const [other] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(yield* repo.complete(claim)).toBe(false)
        expect(yield* repo.fail(claim, "x", { _tag: "Dead" })).toBe("stale")
        expect((yield* getItem(other.id)).state).toBe("running")
      })))
  })

  describe("enqueueMany", () => {
    it.live("stores delay, runAt, priority and maxAttempts per item; results in input order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const at = Date.now() + 7_200_000
        const before = yield* dbNow
        const results = yield* repo.enqueueMany([
          { kind: "a", payload: { i: 0 }, delay: "5 minutes", priority: 3 },
          { kind: "b", payload: { i: 1 }, key: "x", runAt: at, maxAttempts: 2 },
          { kind: "a", payload: { i: 2 }, priority: -7, maxAttempts: 1 },
          { kind: "b", payload: { i: 3 }, key: "y", delay: 1_000 }
        ])
        const after = yield* dbNow
        expect(results.map((r) => r._tag)).toEqual(["Enqueued", "Enqueued", "Enqueued", "Enqueued"])
        const items = yield* Effect.forEach(results, (r) => getItem(r.id))
        expect(items.map((i) => i.payload)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }])
        // Not given: null (the claimer decides), as a keyed batch stores it.
        expect(items.map((i) => [i.kind, i.key, i.priority, i.maxAttempts, i.state])).toEqual([
          ["a", null, 3, null, "waiting"],
          ["b", "x", 0, 2, "waiting"],
          ["a", null, -7, 1, "waiting"],
          ["b", "y", 0, null, "waiting"]
        ])
        expectAround(items[0].runAt, before + 300_000, after + 300_000, 50)
        expect(items[1].runAt).toBe(at)
        expectAround(items[2].runAt, before, after, 50)
        expectAround(items[3].runAt, before + 1_000, after + 1_000, 50)
        expect(results.map((r) => r.id)).toEqual([...results.map((r) => r.id)].sort((x, y) => x - y))
      })))

    it.live("an unkeyed batch stores each item's own kind, delay, runAt, priority and maxAttempts", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const at = Date.now() + 3_600_000
        const before = yield* dbNow
        const results = yield* repo.enqueueMany([
          { kind: "a", payload: 0, delay: 2_000, priority: 5, maxAttempts: 3 },
          { kind: "b", payload: 1, runAt: at },
          { kind: "a", payload: 2, priority: -1 },
          { kind: "c", payload: 3, delay: 0, maxAttempts: 1 }
        ])
        const after = yield* dbNow
        const items = yield* Effect.forEach(results, (r) => getItem(r.id))
        expect(items.map((i) => [i.kind, i.payload, i.priority, i.maxAttempts])).toEqual([
          ["a", 0, 5, 3],
          ["b", 1, 0, null],
          ["a", 2, -1, null],
          ["c", 3, 0, 1]
        ])
        expectAround(items[0].runAt, before + 2_000, after + 2_000, 50)
        expect(items[1].runAt).toBe(at)
        expectAround(items[2].runAt, before, after, 50)
        expectAround(items[3].runAt, before, after, 50)
        // A batch sharing every value but the payload.
        const shared = yield* repo.enqueueMany([0, 1, 2].map((n) => ({ kind: "d", payload: n, runAt: at, priority: 9 })))
        for (const [n, r] of shared.entries()) {
          const item = yield* getItem(r.id)
          expect([item.kind, item.payload, item.runAt, item.priority, item.maxAttempts]).toEqual(["d", n, at, 9, null])
        }
        // A batch sharing one given budget.
        const budgeted = yield* repo.enqueueMany([0, 1].map((n) => ({ kind: "e", payload: n, maxAttempts: 4 })))
        for (const r of budgeted) expect((yield* getItem(r.id)).maxAttempts).toBe(4)
      })))

    it.live("an empty batch is [] and writes nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.enqueueMany([])).toEqual([])
        expect(yield* countAll).toBe(0)
      })))

    it.live("the default attempts come from the claiming service's options, not written at enqueue", () =>
      run(
        Effect.gen(function*() {
          const repo = yield* Repo
          const added = yield* repo.enqueue("a", 1)
          expect((yield* getItem(added.id)).maxAttempts).toBeNull()
          const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
          expect(claim.maxAttempts).toBe(2)
        }),
        { defaultMaxAttempts: 2 }
      ))

    it.live("a large batch keeps input order", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const requests = Array.from({ length: 500 }, (_, i) => ({
          kind: "bulk",
          payload: i,
          key: i % 7 === 0 ? `k${i % 21}` : undefined
        }))
        const results = yield* repo.enqueueMany(requests)
        expect(results).toHaveLength(500)
        const firstOfKey = new Map<string, number>()
        for (const [i, r] of results.entries()) {
          const key = requests[i].key
          if (key !== undefined && firstOfKey.has(key)) {
            expect(r).toEqual({ _tag: "Deduplicated", id: firstOfKey.get(key) })
          } else {
            expect(r._tag).toBe("Enqueued")
            if (key !== undefined) firstOfKey.set(key, r.id)
            expect((yield* getItem(r.id)).payload).toBe(i)
          }
        }
        expect(yield* countAll).toBe(500 - results.filter((r) => r._tag === "Deduplicated").length)
      })))
  })

  describe("stats, get, nextDueIn", () => {
    it.live("stats count due, scheduled, running, done, dead and cancelled, by kind; an expired lease is due", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.stats).toEqual({ due: 0, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 0, byKind: {} })
        yield* deadItem("b")
        yield* repo.enqueue("b", "done")
        const [finished] = yield* repo.claim({ worker: "w", limit: 1, lease, kinds: ["b"] })
        expect(yield* repo.complete(finished)).toBe(true)
        yield* repo.enqueue("a", "running")
        yield* repo.enqueue("a", "expired")
        const claims = yield* repo.claim({ worker: "w", limit: 2, lease, kinds: ["a"] })
        expect(claims).toHaveLength(2)
        yield* expireLease(claims.find((c) => c.payloadJson === "\"expired\"")!.id)
        yield* repo.enqueue("a", "due")
        yield* repo.enqueue("a", "scheduled", { delay: "1 hour" })
        yield* repo.enqueue("b", "due")
        expect(yield* repo.stats).toEqual({
          due: 3,
          scheduled: 1,
          running: 1,
          done: 1,
          dead: 1,
          cancelled: 0,
          byKind: {
            a: { due: 2, scheduled: 1, running: 1, done: 0, dead: 0, cancelled: 0 },
            b: { due: 1, scheduled: 0, running: 0, done: 1, dead: 1, cancelled: 0 }
          }
        })
      })))

    it.live("getMany: the items among the ids, in id order, in one read; unknown and invalid ids left out", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const a = (yield* repo.enqueue("a", { n: 1 })).id
        const b = (yield* repo.enqueue("b", { n: 2 }, { key: "k" })).id
        expect(yield* repo.getMany([])).toEqual([])
        const got = yield* repo.getMany([b, 999_999, a, b, 0, -1, 1.5])
        expect(got.map((i) => [i.id, i.kind, i.payload, i.key])).toEqual([[a, "a", { n: 1 }, null], [b, "b", { n: 2 }, "k"]])
        // The same items as get reads them.
        expect(got).toEqual([Option.getOrThrow(yield* repo.get(a)), Option.getOrThrow(yield* repo.get(b))])
      })))

    it.live("get of a missing id is None; get returns the item as stored", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.get(1)).toEqual(Option.none())
        expect(yield* repo.get(999_999)).toEqual(Option.none())
        // Ids that cannot name an item are None too, on every backend (not a StorageError).
        for (const id of [0, -1, 1.5, NaN, Infinity, 2 ** 63]) {
          expect(yield* repo.get(id)).toEqual(Option.none())
        }
        const before = yield* dbNow
        const added = yield* repo.enqueue("email.send", { to: "x" }, { key: "m1", priority: 2, maxAttempts: 4 })
        const after = yield* dbNow
        const item = yield* getItem(added.id)
        expect(item).toMatchObject({
          id: added.id,
          kind: "email.send",
          payload: { to: "x" },
          key: "m1",
          priority: 2,
          state: "waiting",
          attempts: 0,
          maxAttempts: 4,
          lastError: null,
          claimedBy: null,
          leaseUntil: null
        })
        expectAround(item.createdAt, before, after, 50)
        expectAround(item.updatedAt, before, after, 50)
        expectAround(item.runAt, before, after, 50)
      })))

    it.live("nextDueIn: None on an empty queue, about the delay for a scheduled item, items already due not reported", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.nextDueIn).toEqual(Option.none())
        // An item due at once is the claim's, not the wait's.
        const immediate = yield* repo.enqueue("job", { now: true })
        expect(yield* repo.nextDueIn).toEqual(Option.none())
        const added = yield* repo.enqueue("job", {}, { delay: "1 minute" })
        const wait = yield* repo.nextDueIn
        expect(Option.isSome(wait)).toBe(true)
        expectAround(Duration.toMillis(Option.getOrThrow(wait)), 55_000, 60_000, 0)
        // A scheduled item that has come due is not reported either: the next is.
        yield* repo.enqueue("job", {}, { delay: "5 minutes" })
        yield* makeDue(added.id)
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 295_000, 300_000, 0)
        // So is one whose backoff has passed (scheduled after its creation, due now).
        yield* setRow(added.id, { created_at: 1, run_at: 2 })
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 295_000, 300_000, 0)
        // A running item's lease end counts too.
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease: "20 seconds" })
        expect(claim.id).toBe(added.id)
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 15_000, 20_000, 0)
        // Dead items are not waited for.
        expect(yield* repo.fail(claim, "x", { _tag: "Dead" })).toBe("dead")
        expectAround(Duration.toMillis(Option.getOrThrow(yield* repo.nextDueIn)), 290_000, 300_000, 0)
        // The item due at once was waiting all along.
        expect(Option.map(yield* repo.get(immediate.id), (i) => i.state)).toEqual(Option.some("waiting"))
      })))

    it.live("nextDueIn is None when only dead items remain", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* deadItem("job")
        expect(yield* repo.nextDueIn).toEqual(Option.none())
      })))
  })

  describe("dead items", () => {
    it.live("listDead: by kind, paged with after and limit, with the last error", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        expect(yield* repo.listDead()).toEqual([])
        const d1 = yield* deadItem("a", undefined, "e1")
        const d2 = yield* deadItem("a", undefined, "e2")
        const d3 = yield* deadItem("b", undefined, "e3")
        yield* repo.enqueue("a", "alive")
        const d4 = yield* deadItem("a", undefined, "e4")
        const d5 = yield* deadItem("b", undefined, "e5")
        const all = yield* repo.listDead()
        expect(all.map((i) => i.id)).toEqual([d1, d2, d3, d4, d5])
        expect(all.map((i) => i.lastError)).toEqual(["e1", "e2", "e3", "e4", "e5"])
        expect(all.every((i) => i.state === "dead")).toBe(true)
        expect((yield* repo.listDead({ kind: "a" })).map((i) => i.id)).toEqual([d1, d2, d4])
        expect((yield* repo.listDead({ kind: "zzz" })).map((i) => i.id)).toEqual([])
        const page1 = yield* repo.listDead({ limit: 2 })
        expect(page1.map((i) => i.id)).toEqual([d1, d2])
        const page2 = yield* repo.listDead({ limit: 2, after: page1[1].id })
        expect(page2.map((i) => i.id)).toEqual([d3, d4])
        const page3 = yield* repo.listDead({ limit: 2, after: page2[1].id })
        expect(page3.map((i) => i.id)).toEqual([d5])
        expect(yield* repo.listDead({ limit: 2, after: d5 })).toEqual([])
        expect((yield* repo.listDead({ kind: "b", after: d3 })).map((i) => i.id)).toEqual([d5])
        yield* expectInvalid(repo.listDead({ limit: 0 }), "page")
        yield* expectInvalid(repo.listDead({ after: -1 }), "page")
        yield* expectInvalid(repo.listDead({ kind: "bad kind" }), "kind")
      })))

    it.live("retryDead by ids, all, and all of a kind: waiting again with a fresh attempt budget", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const d1 = yield* deadItem("a")
        const d2 = yield* deadItem("a")
        const d3 = yield* deadItem("b")
        const d4 = yield* deadItem("b")
        const d5 = yield* deadItem("c")
        expect(yield* repo.retryDead({ ids: [d2, 123_456] })).toEqual([d2])
        const retried = yield* getItem(d2)
        expect(retried).toMatchObject({ state: "waiting", attempts: 0, claimedBy: null, leaseUntil: null })
        expect(retried.runAt).toBeLessThanOrEqual(yield* dbNow)
        // A waiting id is not dead: not retried again.
        expect(yield* repo.retryDead({ ids: [d2] })).toEqual([])
        expect(yield* repo.retryDead({ all: true, kind: "b" })).toEqual([d3, d4])
        expect((yield* repo.listDead()).map((i) => i.id)).toEqual([d1, d5])
        expect(yield* repo.retryDead({ all: true })).toEqual([d1, d5])
        expect(yield* repo.listDead()).toEqual([])
        expect(yield* countState("waiting")).toBe(5)
        // A retried item is claimable and runs with attempt 1.
        const claims = yield* repo.claim({ worker: "w", limit: 10, lease })
        expect(claims.map((c) => c.attempt)).toEqual([1, 1, 1, 1, 1])
        yield* expectInvalid(repo.retryDead({ ids: [] }), "ids")
        yield* expectInvalid(repo.retryDead({ ids: [1.5] }), "ids")
      })))

    it.live("retryDead leaves dead an item whose key a waiting item holds, and retries one of dead twins", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const held = yield* deadItem("mirror.refresh", "k")
        const waiting = yield* repo.enqueue("mirror.refresh", "new", { key: "k" })
        expect(waiting._tag).toBe("Enqueued")
        expect(yield* repo.retryDead({ ids: [held] })).toEqual([])
        expect(yield* repo.retryDead({ all: true })).toEqual([])
        expect((yield* getItem(held)).state).toBe("dead")
        // Twins: two dead items with one key; only the first is retried.
        const t1 = yield* deadItem("mirror.refresh", "twin")
        const t2 = yield* deadItem("mirror.refresh", "twin")
        expect(yield* repo.retryDead({ ids: [t2, t1] })).toEqual([t1])
        expect((yield* getItem(t2)).state).toBe("dead")
        expect(yield* countState("waiting")).toBe(2)
      })))

    it.live("deleteDead by ids, all of a kind, all; it never touches live items", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const d1 = yield* deadItem("a")
        const d2 = yield* deadItem("a")
        const d3 = yield* deadItem("b")
        const alive = yield* repo.enqueue("a", "alive")
        expect(yield* repo.deleteDead({ ids: [d1, alive.id] })).toEqual([d1])
        expect(yield* repo.get(d1)).toEqual(Option.none())
        expect((yield* getItem(alive.id)).state).toBe("waiting")
        expect(yield* repo.deleteDead({ all: true, kind: "b" })).toEqual([d3])
        expect(yield* repo.deleteDead({ all: true })).toEqual([d2])
        expect(yield* repo.deleteDead({ all: true })).toEqual([])
        expect(yield* countAll).toBe(1)
        yield* expectInvalid(repo.deleteDead({ ids: [] }), "ids")
        yield* expectInvalid(repo.deleteDead({ all: true, kind: "" }), "kind")
      })))
  })

  describe("input validation: a typed InvalidInput, nothing written", () => {
    const bad: ReadonlyArray<readonly [string, InvalidField, (repo: QueueRepo.Service) => Effect.Effect<unknown, unknown>]> = [
      ["empty kind", "kind", (r) => r.enqueue("", {})],
      ["a kind of 129 characters", "kind", (r) => r.enqueue("k".repeat(129), {})],
      ["a kind with a space", "kind", (r) => r.enqueue("email send", {})],
      ["a kind with a quote", "kind", (r) => r.enqueue("email'send", {})],
      ["a kind that is not a string", "kind", (r) => r.enqueue(42 as unknown as string, {})],
      ["payload undefined", "payload", (r) => r.enqueue("job", undefined)],
      ["payload a function", "payload", (r) => r.enqueue("job", () => 1)],
      ["payload holding a function", "payload", (r) => r.enqueue("job", { f: () => 1 })],
      ["payload a BigInt", "payload", (r) => r.enqueue("job", 10n)],
      ["payload holding a BigInt", "payload", (r) => r.enqueue("job", { n: 10n })],
      ["payload NaN", "payload", (r) => r.enqueue("job", NaN)],
      ["payload holding Infinity", "payload", (r) => r.enqueue("job", { n: [1, Infinity] })],
      ["payload holding a symbol", "payload", (r) => r.enqueue("job", { s: Symbol("x") })],
      ["payload a cycle", "payload", (r) => {
        const cycle: Record<string, unknown> = { a: 1 }
        cycle.self = cycle
        return r.enqueue("job", cycle)
      }],
      ["payload over the size limit", "payload", (r) => r.enqueue("job", "x".repeat(100))],
      ["payload over the size limit in bytes, not characters", "payload", (r) => r.enqueue("job", "é".repeat(40))],
      ["key empty", "key", (r) => r.enqueue("job", {}, { key: "" })],
      ["key with NUL", "key", (r) => r.enqueue("job", {}, { key: "a\u0000b" })],
      ["key with a lone surrogate", "key", (r) => r.enqueue("job", {}, { key: "a\ud800b" })],
      ["key over 512 characters", "key", (r) => r.enqueue("job", {}, { key: "k".repeat(513) })],
      ["negative delay", "delay", (r) => r.enqueue("job", {}, { delay: -1 })],
      ["NaN delay", "delay", (r) => r.enqueue("job", {}, { delay: NaN })],
      ["infinite delay", "delay", (r) => r.enqueue("job", {}, { delay: Duration.infinity })],
      ["a delay that is not a duration", "delay", (r) => r.enqueue("job", {}, { delay: "soon" as never })],
      ["delay and runAt together", "delay", (r) => r.enqueue("job", {}, { delay: 10, runAt: Date.now() })],
      ["an invalid Date runAt", "runAt", (r) => r.enqueue("job", {}, { runAt: new Date("nope") })],
      ["a NaN runAt", "runAt", (r) => r.enqueue("job", {}, { runAt: NaN })],
      ["priority 1.5", "priority", (r) => r.enqueue("job", {}, { priority: 1.5 })],
      ["priority beyond int32", "priority", (r) => r.enqueue("job", {}, { priority: 2 ** 31 })],
      ["maxAttempts 0", "maxAttempts", (r) => r.enqueue("job", {}, { maxAttempts: 0 })],
      ["maxAttempts 2.5", "maxAttempts", (r) => r.enqueue("job", {}, { maxAttempts: 2.5 })],
      ["enqueueMany with one bad item among good ones", "priority", (r) =>
        r.enqueueMany([
          { kind: "job", payload: 1 },
          { kind: "job", payload: 2, key: "k" },
          { kind: "job", payload: 3, priority: 0.5 },
          { kind: "job", payload: 4 }
        ])],
      ["enqueueMany whose last item is bad", "kind", (r) =>
        r.enqueueMany([{ kind: "job", payload: 1 }, { kind: "job", payload: 2 }, { kind: "", payload: 3 }])]
    ]
    for (const [name, field, attempt] of bad) {
      it.live(`${name}: InvalidInput on ${field}`, () =>
        run(
          Effect.gen(function*() {
            const repo = yield* Repo
            yield* expectInvalid(attempt(repo), field)
            expect(yield* countAll).toBe(0)
          }),
          { maxPayloadBytes: 64 }
        ))
    }

    it.live("the size limit counts JSON bytes: a payload at the limit is accepted", () =>
      run(
        Effect.gen(function*() {
          const repo = yield* Repo
          // "é" is 2 bytes: 31 of them plus the quotes are 64 bytes.
          const added = yield* repo.enqueue("job", "é".repeat(31))
          expect((yield* getItem(added.id)).payload).toBe("é".repeat(31))
          yield* expectInvalid(repo.enqueue("job", "é".repeat(32)), "payload")
          expect(yield* countAll).toBe(1)
        }),
        { maxPayloadBytes: 64 }
      ))

    it.live("an enqueueMany error names the bad item", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const error = yield* expectInvalid(
          repo.enqueueMany([{ kind: "job", payload: 1 }, { kind: "job", payload: 2, maxAttempts: 0 }]),
          "maxAttempts"
        )
        expect(error.reason).toContain("item 1")
        expect(yield* countAll).toBe(0)
      })))

    it.live("bad claims: limit 0, lease 0, a bad worker or kind; nothing is leased", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const added = yield* repo.enqueue("job", {})
        yield* expectInvalid(repo.claim({ worker: "w", limit: 0, lease }), "limit")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1.5, lease }), "limit")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease: 0 }), "lease")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease: "0 millis" }), "lease")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease: -5 }), "lease")
        yield* expectInvalid(repo.claim({ worker: "", limit: 1, lease }), "worker")
        yield* expectInvalid(repo.claim({ worker: "w", limit: 1, lease, kinds: ["ok", "not ok"] }), "kind")
        expect(yield* countState("running")).toBe(0)
        expect((yield* getItem(added.id)).attempts).toBe(0)
      })))

    it.live("bad fail and extend arguments change nothing", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        const before = yield* getItem(claim.id)
        yield* expectInvalid(repo.fail(claim, "x", { _tag: "Retry", delay: -1 }), "delay")
        yield* expectInvalid(repo.fail(claim, "x", { _tag: "Retry", delay: NaN }), "delay")
        yield* expectInvalid(repo.extend(claim, 0), "lease")
        yield* expectInvalid(repo.extendMany([claim], NaN), "lease")
        expect(yield* getItem(claim.id)).toEqual(before)
      })))
  })

  describe("hostile values are stored exactly", () => {
    const hostile = {
      quotes: `it's "quoted" \`back\``,
      sql: "'; DROP TABLE docket_items; --",
      emoji: "📬 ✉️ 👩‍👩‍👧",
      nul: "before\u0000after",
      lone: "x\ud800y\udfffz",
      backslash: "C:\\path\\n\\u0000",
      nested: { "key with 'quote'": ["\"", "'", "\\", "\n\t"] },
      numbers: [0, -1, 1.5, 1e300, Number.MAX_SAFE_INTEGER]
    }

    it.live("payloads and keys round-trip through get and claim", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const keys = ["k'\"; DROP TABLE docket_items; --", "🔑 ключ", "back\\slash", "percent %s $1 ?1 :name"]
        const added = yield* Effect.forEach(keys, (key) => repo.enqueue("job", { ...hostile, key }, { key }))
        expect(added.map((a) => a._tag)).toEqual(["Enqueued", "Enqueued", "Enqueued", "Enqueued"])
        // Dedupe finds each hostile key.
        for (const [i, key] of keys.entries()) {
          expect(yield* repo.enqueue("job", 0, { key })).toEqual({ _tag: "Deduplicated", id: added[i].id })
        }
        const [many] = yield* repo.enqueueMany([{ kind: "job", payload: hostile, key: keys[0] }])
        expect(many).toEqual({ _tag: "Deduplicated", id: added[0].id })
        for (const [i, key] of keys.entries()) {
          const item = yield* getItem(added[i].id)
          expect(item.key).toBe(key)
          expect(item.payload).toEqual({ ...hostile, key })
        }
        const plain = yield* repo.enqueue("job", hostile.lone)
        expect((yield* getItem(plain.id)).payload).toBe(hostile.lone)
        const claims = yield* repo.claim({ worker: "w'\"; --", limit: 10, lease })
        expect(claims).toHaveLength(5)
        for (const claim of claims) {
          const i = added.findIndex((a) => a.id === claim.id)
          if (i === -1) {
            expect(JSON.parse(claim.payloadJson)).toBe(hostile.lone)
          } else {
            expect(claim.key).toBe(keys[i])
            expect(JSON.parse(claim.payloadJson)).toEqual({ ...hostile, key: keys[i] })
          }
          expect(claim.worker).toBe("w'\"; --")
        }
        expect(yield* countAll).toBe(5)
      })))

    it.live("a batch stores each payload's JSON text exactly, with and without keys", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const payloads: ReadonlyArray<unknown> = [
          hostile,
          ...Object.values(hostile),
          null,
          "\ud800",
          "]}, [\"",
          { "": [[], {}, [null]] },
          -0.5
        ]
        const plain = yield* repo.enqueueMany(payloads.map((payload) => ({ kind: "job", payload })))
        const keyed = yield* repo.enqueueMany(payloads.map((payload, i) => ({ kind: "keyed", payload, key: `k${i}` })))
        const ids = [...plain, ...keyed].map((r) => {
          expect(r._tag).toBe("Enqueued")
          return r.id
        })
        const claims = yield* repo.claim({ worker: "w", limit: 100, lease })
        expect(claims).toHaveLength(ids.length)
        const byId = new Map(claims.map((c) => [c.id, c.payloadJson]))
        const expected = [...payloads, ...payloads].map((p) => JSON.stringify(p))
        expect(ids.map((id) => byId.get(id))).toEqual(expected)
      })))

    it.live("error texts are kept (NUL escaped, lone surrogates replaced), quotes and all", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        const error = `it's "bad"; DROP TABLE docket_items; -- 📬 \u0000 \ud800`
        expect(yield* repo.fail(claim, error, { _tag: "Retry", delay: 0 })).toBe("retried")
        const item = yield* getItem(claim.id)
        expect(item.lastError).toBe(`it's "bad"; DROP TABLE docket_items; -- 📬 \\u0000 \ufffd`)
        const [again] = yield* repo.claim({ worker: "w", limit: 1, lease })
        expect(again.lastError).toBe(item.lastError)
        // A very long error is kept bounded.
        expect(yield* repo.fail(again, "e".repeat(100_000), { _tag: "Dead" })).toBe("dead")
        const dead = yield* getItem(again.id)
        expect(dead.lastError!.startsWith("e".repeat(16_384))).toBe(true)
        expect(dead.lastError!.length).toBeLessThan(16_500)
      })))
  })

  describe("transactions", () => {
    it.live("an enqueue inside a transaction that fails is rolled back; one that succeeds commits", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const sql = yield* SqlClient.SqlClient
        const failed = yield* sql.withTransaction(
          Effect.gen(function*() {
            yield* repo.enqueue("job", 1, { key: "k" })
            yield* repo.enqueueMany([{ kind: "job", payload: 2 }, { kind: "job", payload: 3, key: "k" }])
            expect(yield* countAll).toBe(2)
            return yield* Effect.fail("boom" as const)
          })
        ).pipe(Effect.flip)
        expect(failed).toBe("boom")
        expect(yield* countAll).toBe(0)
        // The rolled-back key is not held.
        const ok = yield* sql.withTransaction(
          Effect.zip(repo.enqueue("job", 4, { key: "k" }), repo.enqueue("job", 5))
        )
        expect(ok[0]._tag).toBe("Enqueued")
        expect(yield* countAll).toBe(2)
        expect((yield* getItem(ok[0].id)).payload).toBe(4)
      })))

    it.live("a defect inside the transaction rolls back the enqueue too", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        const sql = yield* SqlClient.SqlClient
        const exit = yield* sql.withTransaction(
          Effect.zipRight(repo.enqueue("job", 1), Effect.die(new Error("crash")))
        ).pipe(Effect.exit)
        expect(exit._tag).toBe("Failure")
        expect(yield* countAll).toBe(0)
      })))
  })

  describe("storage errors", () => {
    it.live("operations on a dropped table fail with a typed StorageError", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.enqueue("job", {})
        const [claim] = yield* repo.claim({ worker: "w", limit: 1, lease })
        yield* dropTable
        const error = yield* expectStorageError(repo.enqueue("job", {}))
        expect(error.operation).toBe("enqueue")
        yield* expectStorageError(repo.enqueueMany([{ kind: "job", payload: 1 }]))
        yield* expectStorageError(repo.claim({ worker: "w", limit: 1, lease }))
        yield* expectStorageError(repo.complete(claim))
        yield* expectStorageError(repo.fail(claim, "x", { _tag: "Retry", delay: 0 }))
        yield* expectStorageError(repo.release(claim))
        yield* expectStorageError(repo.extend(claim, lease))
        yield* expectStorageError(repo.stats)
        yield* expectStorageError(repo.get(1))
        yield* expectStorageError(repo.listDead())
        yield* expectStorageError(repo.retryDead({ all: true }))
        yield* expectStorageError(repo.deleteDead({ all: true }))
        yield* expectStorageError(repo.nextDueIn)
      })))

    it.live("input is checked before the database: bad input is InvalidInput even when storage is broken", () =>
      run(Effect.gen(function*() {
        const repo = yield* Repo
        yield* dropTable
        yield* expectInvalid(repo.enqueue("", {}), "kind")
      })))
  })

  describe("migrations", () => {
    it.live("running the migrations twice: the second run is a no-op", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        yield* Effect.gen(function*() {
          expect(yield* Migrations.run).toEqual(ALL_MIGRATIONS)
          expect(yield* Migrations.run).toEqual([])
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          const repo = yield* Repo
          const added = yield* repo.enqueue("job", {})
          expect(yield* Migrations.run).toEqual([])
          expect((yield* getItem(added.id)).state).toBe("waiting")
        }).pipe(Effect.provide(QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url, { migrate: false })))))
        // A layer that migrates on build finds nothing to do and keeps the data.
        yield* Effect.gen(function*() {
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          expect(yield* countAll).toBe(1)
        }).pipe(Effect.provide(repoLayer(url)))
      }))

    it.live("two migrators at the same time on a fresh database both succeed; one applies the schema", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const migrator = Effect.provide(Migrations.run, Database.layer(url, { migrate: false }))
        const results = yield* Effect.all([migrator, migrator], { concurrency: "unbounded" })
        expect(results.flat()).toEqual(ALL_MIGRATIONS)
        yield* Effect.gen(function*() {
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          const repo = yield* Repo
          expect((yield* repo.enqueue("job", {}))._tag).toBe("Enqueued")
        }).pipe(Effect.provide(repoLayer(url)))
      }))

    it.live("three migrator processes released at once on a fresh database all succeed; one applies the schema", () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const results = yield* racingMigrators(url, 3)
        for (const result of results) {
          expect(result.error, result.stderr).toBeUndefined()
          expect(result.code, result.stderr).toBe(0)
        }
        expect(results.flatMap((r) => r.applied ?? [])).toEqual(ALL_MIGRATIONS)
        yield* Effect.gen(function*() {
          expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
          const repo = yield* Repo
          expect((yield* repo.enqueue("job", {}))._tag).toBe("Enqueued")
        }).pipe(Effect.provide(repoLayer(url)))
      }), 60_000)

    it.live("three Database layers built at once on a fresh database all come up migrated", () =>
      Effect.scoped(Effect.gen(function*() {
        const url = yield* Effect.promise(() => backend.fresh())
        const contexts = yield* Effect.all(
          [0, 1, 2].map(() => Layer.build(repoLayer(url))),
          { concurrency: "unbounded" }
        )
        for (const context of contexts) {
          yield* Effect.gen(function*() {
            expect(yield* migrationRows).toEqual(ALL_MIGRATIONS)
            const repo = yield* Repo
            expect((yield* repo.enqueue("job", {}))._tag).toBe("Enqueued")
          }).pipe(Effect.provide(context))
        }
        yield* Effect.provide(countAll, contexts[0]).pipe(Effect.map((n) => expect(n).toBe(3)))
      })))
  })
  attemptsConformance(backend)
  kindsConformance(backend)
  snoozeConformance(backend)
  cancelConformance(backend)
  historyConformance(backend)
  recurringConformance(backend)
  upgradeConformance(backend)
}

/** Shared with the PostgreSQL-only tests. */
export { dbNow, expectAround, getItem }
