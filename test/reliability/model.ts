/**
 * Model-based test (fast-check): random sequences of enqueue (with keys, and
 * what a held key does: keep, replace, debounce, replaceRunning),
 * claim, complete, fail (retry, dead or the handler's cancel), release,
 * snooze, extend (one at a time and in batches of two), a person's cancel
 * (of existing and unknown ids), pausing and resuming kinds and setting their
 * global concurrency and rate limits (claims then take `limitedMax`), and
 * time moving forward, run against the real `QueueRepo` on SQLite and
 * PostgreSQL and against an in-memory model of the same state machine.
 * After every step the operation's result, every stored row (the kinds' rate
 * slots too), `stats`, `listKinds` and `nextDueIn` agree with the model.
 *
 * Time: the database's clock runs on during a test, so the model keeps its
 * own clock in whole minutes and maps it onto the rows. A time the database
 * computes (now + delay, now + lease) is checked against the model's (within
 * the real time elapsed since the run began), then set to the model's exact
 * value; "time moves forward by d" moves every stored time back by d. As a run
 * takes seconds and model times differ by whole minutes, the database decides
 * "due" and "expired" exactly as the model does.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, ManagedRuntime, Option } from "effect"
import fc from "fast-check"
import { afterAll, describe, expect, it } from "vitest"
import { REPLACED_REASON } from "../../src/internal/store/enqueue.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, itemTables, pgAvailable, pgBackend, repoLayer, setRow, sqliteBackend } from "../support/db.js"
import { report } from "./support.js"

const MINUTE = 60_000
const KINDS = ["a", "b", "c"] as const

// --- the model ---

type State = "waiting" | "running" | "done" | "dead" | "cancelled"

interface MItem {
  readonly id: number
  readonly kind: string
  readonly key: string | null
  /** A replacing enqueue (onConflict) changes these. */
  priority: number
  /** As the enqueue gave it; null: the claim decides (its kind's budget, else 8). */
  maxAttempts: number | null
  state: State
  runAt: number
  attempts: number
  lastError: string | null
  claimedBy: string | null
  leaseUntil: number | null
  seq: number
  snoozes: number
}

/** Error text as the queue keeps it (validate.normaliseError): NUL escaped, well-formed, bounded. */
const normalise = (error: string) => {
  const clean = error.replaceAll("\u0000", "\\u0000")
  const wellFormed = clean.isWellFormed() ? clean : clean.toWellFormed()
  return wellFormed.length > 16_384 ? `${wellFormed.slice(0, 16_384)}… (truncated)` : wellFormed
}

/** A kind's controls; a rate slot's time is -Infinity while never used. */
interface MKind {
  paused: boolean
  concurrency: number | null
  rate: { limit: number; period: number } | null
  slots: Array<{ slot: number; at: number }>
  /** Limits set by a person (docket kind set), else the code's. */
  byPerson: boolean
}

class Model {
  now = 0
  readonly items = new Map<number, MItem>()
  readonly kinds = new Map<string, MKind>()

  private control(kind: string): MKind {
    let k = this.kinds.get(kind)
    if (k === undefined) this.kinds.set(kind, k = { paused: false, concurrency: null, rate: null, slots: [], byPerson: false })
    return k
  }

  setPaused(kind: string, paused: boolean) {
    this.control(kind).paused = paused
  }

  // A person's limits; the slots keep the newest `limit` starts, new ones never used.
  setLimits(kind: string, concurrency: number | null, rate: { limit: number; period: number } | null) {
    const k = this.control(kind)
    k.concurrency = concurrency
    k.rate = rate
    k.byPerson = true
    const keep = [...k.slots].sort((a, b) => b.at - a.at || b.slot - a.slot).slice(0, rate?.limit ?? 0)
    const base = keep.length === 0 ? 0 : Math.max(...keep.map((x) => x.slot)) + 1
    for (let i = 0; keep.length < (rate?.limit ?? 0); i++) keep.push({ slot: base + i, at: -Infinity })
    k.slots = keep.sort((a, b) => a.slot - b.slot)
  }

  private liveOf(kind: string) {
    return [...this.items.values()].filter((i) => i.kind === kind && i.state === "running" && i.leaseUntil! > this.now)
      .length
  }

  /**
   * As the claim does it: controlled kinds among those asked for (paused ones
   * left out); each limited kind, in kind order, up to its allowance (and
   * `limitedMax` in all), its oldest slots taking now; then the rest.
   */
  claim(
    worker: string,
    limit: number,
    lease: number,
    kinds: ReadonlyArray<string> | undefined,
    limitedMax: number
  ): Array<MItem> {
    const asked = (k: string) => kinds === undefined || kinds.includes(k)
    const controlled = [...this.kinds].filter(([k, c]) => asked(k) && (c.paused || c.concurrency !== null || c.rate !== null))
      .map(([k]) => k).sort()
    if (controlled.length === 0) return this.claimFrom(worker, limit, lease, kinds, [])
    const out: Array<MItem> = []
    let limitedLeft = Math.min(limit, limitedMax)
    for (const kind of controlled) {
      const c = this.kinds.get(kind)!
      if (c.paused || limitedLeft <= 0) continue
      let allowed = limitedLeft
      if (c.concurrency !== null) allowed = Math.min(allowed, c.concurrency - this.liveOf(kind))
      if (c.rate !== null) allowed = Math.min(allowed, c.slots.filter((x) => x.at <= this.now - c.rate!.period).length)
      if (allowed <= 0) continue
      const got = this.claimFrom(worker, allowed, lease, [kind], [])
      if (c.rate !== null) {
        for (const x of [...c.slots].sort((a, b) => a.at - b.at || a.slot - b.slot).slice(0, got.length)) x.at = this.now
      }
      limitedLeft -= got.length
      out.push(...got)
    }
    if (limit - out.length > 0) out.push(...this.claimFrom(worker, limit - out.length, lease, kinds, controlled))
    return out.sort(claimOrder)
  }

  private waitingTwin(kind: string, key: string | null, except?: number) {
    if (key === null) return undefined
    return [...this.items.values()].find((i) => i.id !== except && i.state === "waiting" && i.kind === kind && i.key === key)
  }

  /** The id of the waiting item that dedupes this enqueue, if any. */
  dedupe(kind: string, key: string | null) {
    return this.waitingTwin(kind, key)?.id
  }

  /**
   * A replacing enqueue of a held key (onConflict replace, debounce,
   * replaceRunning): the waiting twin takes its due time (debounce: only a
   * later one), priority and max attempts (when given), and starts again.
   */
  replace(twin: number, mode: QueueRepo.OnConflict, delay: number, priority: number, maxAttempts: number | null) {
    const item = this.items.get(twin)!
    item.runAt = mode === "debounce" ? Math.max(item.runAt, this.now + delay) : this.now + delay
    item.priority = priority
    if (maxAttempts !== null) item.maxAttempts = maxAttempts
    item.attempts = 0
    item.snoozes = 0
    item.lastError = null
  }

  /** replaceRunning: the running items of the kind and key but `except` are cancelled (as `cancel`); their ids. */
  cancelRunning(kind: string, key: string, except: number): Array<number> {
    const running = [...this.items.values()].filter((i) =>
      i.state === "running" && i.kind === kind && i.key === key && i.id !== except
    ).map((i) => i.id).sort((a, b) => a - b)
    if (running.length > 0) this.cancel(running, REPLACED_REASON)
    return running
  }

  insert(id: number, kind: string, key: string | null, delay: number, priority: number, maxAttempts: number | null) {
    this.items.set(id, {
      id,
      kind,
      key,
      priority,
      maxAttempts,
      state: "waiting",
      runAt: this.now + delay,
      attempts: 0,
      lastError: null,
      claimedBy: null,
      leaseUntil: null,
      seq: 0,
      snoozes: 0
    })
  }

  private claimFrom(
    worker: string,
    limit: number,
    lease: number,
    kinds: ReadonlyArray<string> | undefined,
    excluded: ReadonlyArray<string>
  ): Array<MItem> {
    const inKinds = (i: MItem) => (kinds === undefined || kinds.includes(i.kind)) && !excluded.includes(i.kind)
    const live = (i: MItem) => i.state === "running" && i.leaseUntil! > this.now
    const all = [...this.items.values()]
    const expired = all.filter((i) => i.state === "running" && i.leaseUntil! <= this.now && inKinds(i))
    const waiting = all.filter((i) =>
      i.state === "waiting" && i.runAt <= this.now && inKinds(i) &&
      (i.key === null || !all.some((r) => live(r) && r.kind === i.kind && r.key === i.key))
    )
    const picked = [...expired, ...waiting].sort(claimOrder).slice(0, limit)
    for (const i of picked) {
      i.state = "running"
      i.attempts++
      i.seq++
      i.claimedBy = worker
      i.leaseUntil = this.now + lease
    }
    return picked
  }

  private held(claim: QueueRepo.Claim) {
    const item = this.items.get(claim.id)
    return item !== undefined && item.state === "running" && item.seq === claim.token ? item : undefined
  }

  // Kept as done (the default retention), who ran it kept.
  complete(claim: QueueRepo.Claim) {
    const item = this.held(claim)
    if (item === undefined) return false
    item.state = "done"
    item.leaseUntil = null
    return true
  }

  /** An item's budget under a claim with these kinds' budgets. */
  budget(item: MItem, byKind: ReadonlyMap<string, number> | undefined) {
    return item.maxAttempts ?? byKind?.get(item.kind) ?? QueueRepo.DEFAULT_MAX_ATTEMPTS
  }

  // A retry needs an attempt left under the claim's budget (checked against
  // `budget` when it was claimed).
  fail(claim: QueueRepo.Claim, error: string, delay: number | null | "cancel"): QueueRepo.FailOutcome {
    const item = this.held(claim)
    if (item === undefined) return "stale"
    if (delay === "cancel") {
      item.state = "cancelled"
      item.lastError = normalise(error)
      item.claimedBy = null
      item.leaseUntil = null
      return "cancelled"
    }
    const retry = delay !== null && item.attempts < claim.maxAttempts
    if (retry && this.waitingTwin(item.kind, item.key, item.id) !== undefined) {
      this.items.delete(item.id)
      return "absorbed"
    }
    item.state = retry ? "waiting" : "dead"
    if (retry) item.runAt = this.now + delay
    item.lastError = normalise(error)
    item.claimedBy = null
    item.leaseUntil = null
    return retry ? "retried" : "dead"
  }

  // Back to waiting unrun, the attempt given back (absorbed by a waiting twin):
  // the shape release and snooze share; the snooze is due after its delay and
  // counts one more snooze.
  private giveBack(claim: QueueRepo.Claim, snoozeDelay: number | null): "given" | "absorbed" | "stale" {
    const item = this.held(claim)
    if (item === undefined) return "stale"
    if (this.waitingTwin(item.kind, item.key, item.id) !== undefined) {
      this.items.delete(item.id)
      return "absorbed"
    }
    item.state = "waiting"
    item.attempts = Math.max(item.attempts - 1, 0)
    item.claimedBy = null
    item.leaseUntil = null
    if (snoozeDelay !== null) {
      item.runAt = this.now + snoozeDelay
      item.snoozes++
    }
    return "given"
  }

  release(claim: QueueRepo.Claim): QueueRepo.ReleaseOutcome {
    const outcome = this.giveBack(claim, null)
    return outcome === "given" ? "released" : outcome
  }

  snooze(claim: QueueRepo.Claim, delay: number): QueueRepo.SnoozeOutcome {
    const outcome = this.giveBack(claim, delay)
    return outcome === "given" ? "snoozed" : outcome
  }


  // A person's cancel: waiting and running items (a live lease or not) end
  // cancelled, their token bumped; dead and cancelled ones are left as they are.
  cancel(ids: ReadonlyArray<number>, reason: string | null): Array<QueueRepo.CancelOutcome> {
    const outcomes = new Map<number, QueueRepo.CancelOutcome>()
    for (const id of new Set(ids)) {
      const item = this.items.get(id)
      if (item === undefined) outcomes.set(id, "unknown")
      else if (item.state === "done" || item.state === "dead" || item.state === "cancelled") outcomes.set(id, "finished")
      else {
        outcomes.set(id, item.state === "running" ? "cancelledRunning" : "cancelled")
        item.state = "cancelled"
        item.lastError = reason === null ? "Cancelled" : `Cancelled: ${reason}`
        item.seq++
        item.claimedBy = null
        item.leaseUntil = null
      }
    }
    return ids.map((id) => outcomes.get(id)!)
  }

  extend(claim: QueueRepo.Claim, lease: number) {
    const item = this.held(claim)
    if (item === undefined) return false
    item.leaseUntil = this.now + lease
    return true
  }

  stats(): QueueRepo.Stats {
    type Mutable = { -readonly [K in keyof QueueRepo.Counts]: number }
    const byKind: Record<string, Mutable> = {}
    const total: Mutable = { due: 0, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 0 }
    for (const i of [...this.items.values()].sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0))) {
      const c = (byKind[i.kind] ??= { due: 0, scheduled: 0, running: 0, done: 0, dead: 0, cancelled: 0 })
      const bucket: keyof QueueRepo.Counts = i.state === "done" || i.state === "dead" || i.state === "cancelled"
        ? i.state
        : i.state === "waiting"
        ? (i.runAt <= this.now ? "due" : "scheduled")
        : (i.leaseUntil! <= this.now ? "due" : "running")
      c[bucket]++
      total[bucket]++
    }
    return { ...total, byKind }
  }

  /** Every kind with items or controls, as `listKinds` shows it. */
  listKinds(): Array<QueueRepo.KindInfo> {
    const names = [...new Set([...[...this.items.values()].map((i) => i.kind), ...this.kinds.keys()])].sort()
    return names.map((kind) => {
      const c = this.kinds.get(kind)
      const of = [...this.items.values()].filter((i) => i.kind === kind)
      const count = (f: (i: MItem) => boolean) => of.filter(f).length
      return {
        kind,
        paused: c?.paused ?? false,
        concurrency: c?.concurrency ?? null,
        rate: c?.rate == null ? null : { limit: c.rate.limit, periodMs: c.rate.period },
        limitsSetBy: c?.byPerson === true ? "person" : "code",
        // This model has no groups (test/reliability/groupModel.ts models them).
        perGroup: null,
        pausedGroups: 0,
        counts: {
          waiting: count((i) => i.state === "waiting" && i.runAt <= this.now),
          scheduled: count((i) => i.state === "waiting" && i.runAt > this.now),
          running: count((i) => i.state === "running" && i.leaseUntil! > this.now),
          expired: count((i) => i.state === "running" && i.leaseUntil! <= this.now),
          done: count((i) => i.state === "done"),
          dead: count((i) => i.state === "dead"),
          cancelled: count((i) => i.state === "cancelled")
        }
      }
    })
  }

  /**
   * Milliseconds until a waiting item not yet due becomes due, a lease ends
   * (0 if one has) or a used rate slot frees, if any.
   */
  nextDue(): number | undefined {
    const slotFrees = [...this.kinds.values()].flatMap((k) =>
      k.rate === null ? [] : k.slots.map((x) => x.at + k.rate!.period).filter((t) => t > this.now)
    )
    const times = [...this.items.values()].flatMap((i) =>
      i.state === "waiting" ? (i.runAt > this.now ? [i.runAt] : []) : i.state === "running" ? [i.leaseUntil!] : []
    ).concat(slotFrees)
    return times.length === 0 ? undefined : Math.max(0, Math.min(...times) - this.now)
  }
}

const claimOrder = (a: { priority: number; runAt: number; id: number }, b: { priority: number; runAt: number; id: number }) =>
  b.priority - a.priority || a.runAt - b.runAt || a.id - b.id

// --- the operations ---

type Op =
  | {
    op: "enqueue"
    kind: string
    key: string | null
    delay: number
    priority: number
    maxAttempts: number | undefined
    onConflict: QueueRepo.OnConflict | undefined
  }
  | {
    op: "claim"
    worker: string
    limit: number
    lease: number
    kinds: ReadonlyArray<string> | undefined
    budgets: ReadonlyArray<readonly [string, number]> | undefined
    /** The most items of limited kinds (capped at `limit`), or undefined for `limit`. */
    limitedMax: number | undefined
  }
  | { op: "complete"; pick: number }
  | { op: "fail"; pick: number; delay: number | null | "cancel"; error: string }
  | { op: "release"; pick: number }
  | { op: "snooze"; pick: number; delay: number }
  | { op: "extend"; pick: number; lease: number }
  | { op: "failMany"; picks: [number, number]; delay: number | null; error: string }
  | { op: "releaseMany"; picks: [number, number] }
  | { op: "snoozeMany"; picks: [number, number]; delay: number }
  | { op: "completeMany"; picks: [number, number] }
  | { op: "extendMany"; picks: [number, number]; lease: number }
  | { op: "cancel"; picks: [number, number]; reason: string | null }
  | { op: "advance"; by: number }
  | { op: "pause"; kind: string }
  | { op: "resume"; kind: string }
  | {
    op: "limit"
    kind: string
    concurrency: number | null
    rate: { limit: number; period: number } | null
  }

const minutes = (min: number, max: number) => fc.integer({ min, max }).map((m) => m * MINUTE)
const pick = fc.nat({ max: 1000 })
const errorText = fc.constantFrom("boom", `it's "quoted"`, "nul\u0000byte", "lone \ud800 surrogate", "'; DROP TABLE docket_items; --")

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant("enqueue" as const),
      kind: fc.constantFrom(...KINDS),
      key: fc.constantFrom(null, null, "k1", "k2", "it's"),
      delay: fc.oneof(fc.constant(0), minutes(1, 3)),
      priority: fc.integer({ min: -1, max: 1 }),
      // Not given: the claim decides (below, its kinds' budgets, else 8).
      maxAttempts: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      // What a held key does (not given: keep).
      onConflict: fc.constantFrom(undefined, "keep", "replace", "debounce", "replaceRunning")
    })
  },
  // One hot key, so that a replacing enqueue often meets a waiting or running
  // item of its key (with the enqueues above alone, a few times a hundred steps).
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("enqueue" as const),
      kind: fc.constant("a"),
      key: fc.constant("k1"),
      delay: fc.oneof(fc.constant(0), minutes(1, 3)),
      priority: fc.integer({ min: -1, max: 1 }),
      maxAttempts: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      onConflict: fc.constantFrom("replace", "debounce", "replaceRunning", "replaceRunning")
    })
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("claim" as const),
      worker: fc.constantFrom("w1", "w2"),
      limit: fc.integer({ min: 1, max: 4 }),
      lease: minutes(1, 3),
      kinds: fc.option(fc.subarray([...KINDS]), { nil: undefined }),
      budgets: fc.option(fc.array(fc.tuple(fc.constantFrom(...KINDS), fc.integer({ min: 1, max: 3 })), { maxLength: 2 }), {
        nil: undefined
      }),
      limitedMax: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined })
    })
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("complete" as const), pick }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("fail" as const),
      pick,
      // null: dead; "cancel": the handler's Cancel outcome.
      delay: fc.oneof(fc.constant(null), fc.constant("cancel" as const), fc.constant(0), minutes(1, 3)),
      error: errorText
    })
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("release" as const), pick }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("snooze" as const), pick, delay: fc.oneof(fc.constant(0), minutes(1, 3)) })
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("extend" as const), pick, lease: minutes(1, 3) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("failMany" as const),
      picks: fc.tuple(pick, pick),
      delay: fc.option(fc.oneof(fc.constant(0), minutes(1, 3)), { nil: null }),
      error: errorText
    })
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("releaseMany" as const), picks: fc.tuple(pick, pick) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("snoozeMany" as const),
      picks: fc.tuple(pick, pick),
      delay: fc.oneof(fc.constant(0), minutes(1, 3))
    })
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("completeMany" as const), picks: fc.tuple(pick, pick) }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("extendMany" as const), picks: fc.tuple(pick, pick), lease: minutes(1, 3) })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("cancel" as const),
      picks: fc.tuple(pick, pick),
      reason: fc.constantFrom(null, "not wanted", `it's "quoted"`)
    })
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant("advance" as const), by: minutes(1, 4) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("pause" as const), kind: fc.constantFrom(...KINDS) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("resume" as const), kind: fc.constantFrom(...KINDS) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("limit" as const),
      kind: fc.constantFrom(...KINDS),
      concurrency: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
      rate: fc.option(fc.record({ limit: fc.integer({ min: 1, max: 3 }), period: minutes(1, 3) }), { nil: null })
    })
  }
)

// --- running a sequence against both ---

interface Row {
  id: number | string
  kind: string
  dedupe_key: string | null
  priority: number | string
  state: State
  run_at: number | string
  attempts: number | string
  max_attempts: number | string
  max_attempts_given: boolean | number
  last_error: string | null
  claimed_by: string | null
  lease_until: number | string | null
  lease_seq: number | string
  snoozes: number | string
}

type Runtime = ManagedRuntime.ManagedRuntime<QueueRepo.QueueRepo | SqlClient.SqlClient, unknown>

interface Totals {
  steps: number
  claims: number
  limits: number
  /** Enqueues that replaced a waiting item (onConflict), and running items a replaceRunning cancelled. */
  replaced: number
  cancelledByReplace: number
}

const sequence = async (runtime: Runtime, ops: ReadonlyArray<Op>, totals: Totals) => {
  const run = <A, E>(effect: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>) => runtime.runPromise(effect)
  const repo = <A, E>(f: (r: QueueRepo.Service) => Effect.Effect<A, E>) => run(Effect.flatMap(QueueRepo.QueueRepo, f))
  const sql = <A extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
    run(Effect.flatMap(SqlClient.SqlClient, (s) =>
      s.unsafe<A>(s.onDialectOrElse({ pg: () => text, orElse: () => text.replace(/\$\d+/g, "?") }), params)))

  for (const table of await run(itemTables)) await sql(`DELETE FROM ${table}`)
  await sql("DELETE FROM docket_kinds")
  const model = new Model()
  const claims: Array<QueueRepo.Claim> = []
  const startedAt = Date.now()
  // The database time that stands for the model's time 0 (the model's now maps to base).
  const base = startedAt

  /** Checks a time the database computed against the model's; returns the value that pins it. */
  const checkTime = (what: string, actual: number | null, expected: number | null) => {
    if (expected === null || actual === null) {
      expect(actual, what).toBe(expected)
      return expected
    }
    const want = base + expected - model.now
    const elapsed = Date.now() - startedAt
    expect(actual - want, `${what}: database ${actual}, model ${want} (elapsed ${elapsed} ms)`).toBeGreaterThanOrEqual(-50)
    expect(actual - want, `${what}: database ${actual}, model ${want} (elapsed ${elapsed} ms)`).toBeLessThanOrEqual(elapsed + 50)
    return want
  }

  /** Every stored row agrees with the model; the database's times are pinned to the model's. */
  const verify = async (step: string) => {
    const rows = await sql<Row>(
      "SELECT id, kind, dedupe_key, priority, state, run_at, attempts, max_attempts, max_attempts_given, last_error, claimed_by, lease_until, lease_seq, snoozes FROM docket_items_all ORDER BY id"
    )
    const expected = [...model.items.values()].sort((a, b) => a.id - b.id)
    expect(rows.map((r) => Number(r.id)), `${step}: the ids stored`).toEqual(expected.map((i) => i.id))
    for (let n = 0; n < rows.length; n++) {
      const r = rows[n]
      const m = expected[n]
      expect({
        kind: r.kind,
        key: r.dedupe_key,
        priority: Number(r.priority),
        state: r.state,
        attempts: Number(r.attempts),
        // Not given: stored as 8 for workers before migration 0005, flagged.
        maxAttempts: Boolean(r.max_attempts_given) ? Number(r.max_attempts) : null,
        storedMaxAttempts: Number(r.max_attempts),
        lastError: r.last_error,
        claimedBy: r.claimed_by,
        token: Number(r.lease_seq),
        snoozes: Number(r.snoozes)
      }, `${step}: item ${m.id}`).toEqual({
        kind: m.kind,
        key: m.key,
        priority: m.priority,
        state: m.state,
        attempts: m.attempts,
        maxAttempts: m.maxAttempts,
        storedMaxAttempts: m.maxAttempts ?? QueueRepo.DEFAULT_MAX_ATTEMPTS,
        lastError: m.lastError,
        claimedBy: m.claimedBy,
        token: m.seq,
        snoozes: m.snoozes
      })
      const runAt = checkTime(`${step}: item ${m.id} run_at`, Number(r.run_at), m.runAt)!
      const leaseUntil = checkTime(
        `${step}: item ${m.id} lease_until`,
        r.lease_until === null ? null : Number(r.lease_until),
        m.leaseUntil
      )
      if (runAt !== Number(r.run_at) || (leaseUntil ?? null) !== (r.lease_until === null ? null : Number(r.lease_until))) {
        await run(setRow(m.id, { run_at: runAt, lease_until: leaseUntil }))
      }
    }
    expect(await repo((r) => r.stats), `${step}: stats`).toEqual(model.stats())
    expect(await repo((r) => r.listKinds), `${step}: listKinds`).toEqual(model.listKinds())
    await verifySlots(step)
    const next = await repo((r) => r.nextDueIn)
    const want = model.nextDue()
    if (want === undefined) expect(Option.isNone(next), `${step}: nextDueIn`).toBe(true)
    else {
      const ms = Option.match(next, { onNone: () => -1, onSome: Duration.toMillis })
      expect(ms, `${step}: nextDueIn (model ${want})`).toBeGreaterThanOrEqual(Math.max(0, want - (Date.now() - startedAt) - 50))
      expect(ms, `${step}: nextDueIn (model ${want})`).toBeLessThanOrEqual(want + 50)
    }
  }

  const claimAt = (n: number) => claims[n % claims.length]

  // A slot a claim wrote holds the database's now: pinned to the model's (a
  // never-used slot holds 0, far in the past, as the model's -Infinity).
  const pinSlots = async () => {
    for (const [kind, k] of model.kinds) {
      for (const x of k.slots) {
        if (x.at === -Infinity) continue
        await sql("UPDATE docket_kind_slots SET started_at = $1 WHERE kind = $2 AND slot = $3", [base + x.at - model.now, kind, x.slot])
      }
    }
  }

  const verifySlots = async (step: string) => {
    const rows = await sql<{ kind: string; slot: number | string; started_at: number | string }>(
      "SELECT kind, slot, started_at FROM docket_kind_slots ORDER BY kind, slot"
    )
    const want = [...model.kinds].sort(([a], [b]) => (a < b ? -1 : 1)).flatMap(([kind, k]) =>
      k.slots.map((x) => [kind, x.slot, x.at === -Infinity ? "never" : base + x.at - model.now])
    )
    const far = base - 365 * 24 * 3600 * 1000
    expect(rows.map((r) => [r.kind, Number(r.slot), Number(r.started_at) < far ? "never" : Number(r.started_at)]), `${step}: slots`)
      .toEqual(want)
  }

  for (let s = 0; s < ops.length; s++) {
    const op = ops[s]
    const step = `step ${s + 1} ${JSON.stringify(op)}`
    totals.steps++
    switch (op.op) {
      case "enqueue": {
        const twin = model.dedupe(op.kind, op.key)
        const mode = op.onConflict ?? "keep"
        const result = await repo((r) =>
          r.enqueue(op.kind, { step: s }, {
            key: op.key ?? undefined,
            delay: op.delay,
            priority: op.priority,
            maxAttempts: op.maxAttempts,
            onConflict: op.onConflict
          })
        )
        let id: number
        if (twin !== undefined && mode === "keep") {
          expect(result, step).toEqual({ _tag: "Deduplicated", id: twin })
          break
        } else if (twin !== undefined) {
          expect(result._tag, step).toBe("Replaced")
          expect(result.id, step).toBe(twin)
          model.replace(twin, mode, op.delay, op.priority, op.maxAttempts ?? null)
          totals.replaced++
          id = twin
        } else {
          expect(result._tag, step).toBe("Enqueued")
          expect(result.id, `${step}: a new id`).toBeGreaterThan(Math.max(0, ...model.items.keys()))
          model.insert(result.id, op.kind, op.key, op.delay, op.priority, op.maxAttempts ?? null)
          id = result.id
        }
        const cancelled = mode === "replaceRunning" && op.key !== null ? model.cancelRunning(op.kind, op.key, id) : undefined
        expect(result._tag === "Deduplicated" ? undefined : result.cancelled, `${step}: cancelled`).toEqual(cancelled)
        totals.cancelledByReplace += cancelled?.length ?? 0
        break
      }
      case "claim": {
        const budgets = op.budgets === undefined ? undefined : new Map(op.budgets)
        const limitedMax = op.limitedMax === undefined ? undefined : Math.min(op.limitedMax, op.limit)
        const got = await repo((r) =>
          r.claim({ worker: op.worker, limit: op.limit, lease: op.lease, kinds: op.kinds, maxAttemptsByKind: budgets, limitedMax })
        )
        const want = model.claim(op.worker, op.limit, op.lease, op.kinds, limitedMax ?? op.limit)
        expect(got.map((c) => [c.id, c.token, c.attempt, c.worker, c.kind, c.key, c.priority, c.maxAttempts, c.lastError]), step)
          .toEqual(
            want.map((i) => [i.id, i.seq, i.attempts, op.worker, i.kind, i.key, i.priority, model.budget(i, budgets), i.lastError])
          )
        claims.push(...got)
        totals.claims += got.length
        await pinSlots()
        break
      }
      case "pause":
      case "resume": {
        await repo((r) => (op.op === "pause" ? r.pauseKind(op.kind) : r.resumeKind(op.kind)))
        model.setPaused(op.kind, op.op === "pause")
        break
      }
      case "limit": {
        await repo((r) => r.setKindLimits(op.kind, { concurrency: op.concurrency, rate: op.rate }))
        model.setLimits(op.kind, op.concurrency, op.rate)
        totals.limits++
        break
      }
      case "complete": {
        if (claims.length === 0) continue
        const claim = claimAt(op.pick)
        expect(await repo((r) => r.complete(claim)), step).toBe(model.complete(claim))
        break
      }
      case "fail": {
        if (claims.length === 0) continue
        const claim = claimAt(op.pick)
        const next: QueueRepo.FailNext = op.delay === null
          ? { _tag: "Dead" }
          : op.delay === "cancel"
          ? { _tag: "Cancel" }
          : { _tag: "Retry", delay: op.delay }
        expect(await repo((r) => r.fail(claim, op.error, next)), step).toBe(model.fail(claim, op.error, op.delay))
        break
      }
      case "release": {
        if (claims.length === 0) continue
        const claim = claimAt(op.pick)
        expect(await repo((r) => r.release(claim)), step).toBe(model.release(claim))
        break
      }
      case "snooze": {
        if (claims.length === 0) continue
        const claim = claimAt(op.pick)
        expect(await repo((r) => r.snooze(claim, op.delay)), step).toBe(model.snooze(claim, op.delay))
        break
      }
      case "extend": {
        if (claims.length === 0) continue
        const claim = claimAt(op.pick)
        expect(await repo((r) => r.extend(claim, op.lease)), step).toBe(model.extend(claim, op.lease))
        break
      }
      case "failMany":
      case "releaseMany":
      case "snoozeMany":
      case "completeMany":
      case "extendMany": {
        if (claims.length === 0) continue
        const [a, b] = op.picks.map(claimAt)
        // A batch of two different claims (the same claim twice is not a batch anyone
        // sends); they may be two claims of one item, a stale one and the live one.
        const batch = a === b ? [a] : [a, b]
        if (op.op === "failMany") {
          const next: QueueRepo.FailNext = op.delay === null ? { _tag: "Dead" } : { _tag: "Retry", delay: op.delay }
          const got = await repo((r) => r.failMany(batch.map((claim) => ({ claim, error: op.error, next }))))
          expect(got, step).toEqual(batch.map((claim) => model.fail(claim, op.error, op.delay)))
        } else if (op.op === "releaseMany") {
          const got = await repo((r) => r.releaseMany(batch))
          expect(got, step).toEqual(batch.map((claim) => model.release(claim)))
        } else if (op.op === "snoozeMany") {
          const got = await repo((r) => r.snoozeMany(batch.map((claim) => ({ claim, delay: op.delay }))))
          expect(got, step).toEqual(batch.map((claim) => model.snooze(claim, op.delay)))
        } else if (op.op === "completeMany") {
          const got = await repo((r) => r.completeMany(batch))
          expect(got, step).toEqual(batch.map((claim) => model.complete(claim)))
        } else {
          const got = await repo((r) => r.extendMany(batch, op.lease))
          expect(got, step).toEqual(batch.map((claim) => model.extend(claim, op.lease)))
        }
        break
      }
      case "cancel": {
        // Ids of items stored (any state, or gone) and one no item ever had.
        const known = [...new Set([...model.items.keys(), ...claims.map((c) => c.id)])]
        const unknown = Math.max(0, ...known) + 1000
        const ids = op.picks.map((p) => (known.length === 0 || p % 5 === 0 ? unknown : known[p % known.length]))
        const got = await repo((r) => r.cancel(ids, op.reason === null ? {} : { reason: op.reason }))
        expect(got, step).toEqual(model.cancel(ids, op.reason))
        break
      }
      case "advance": {
        for (const table of await run(itemTables)) {
          await sql(`UPDATE ${table} SET run_at = run_at - $1, lease_until = lease_until - $2`, [op.by, op.by])
        }
        await sql("UPDATE docket_kind_slots SET started_at = started_at - $1", [op.by])
        model.now += op.by
        break
      }
    }
    await verify(step)
  }
  // A sequence must finish well within a model minute, or the real clock could matter.
  expect(Date.now() - startedAt, "a sequence takes less than 30 s").toBeLessThan(30_000)
}

/**
 * A batch holding a stale claim and the live claim of the same item: the
 * database changes the item once (fenced by token), and each claim's result
 * must say what happened to it.
 */
const batchResults = (backend: Backend) =>
  // Was a bug (found by the model above, fixed in 701907d): results were matched
  // back to claims by item id only, so the stale claim got the live one's result.
  it("batch results are per claim when two claims of one item are in a batch", async () => {
    const runtime = ManagedRuntime.make(repoLayer(await backend.fresh()))
    try {
      const results = await runtime.runPromise(Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        // A claim made stale (the item was given back and claimed again), and the live claim.
        const pair = (kind: string) =>
          Effect.gen(function*() {
            yield* repo.enqueue(kind, null)
            const [stale] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: [kind] })
            yield* repo.release(stale)
            const [live] = yield* repo.claim({ worker: "w", limit: 1, lease: "1 minute", kinds: [kind] })
            return [stale, live] as const
          })
        const c = yield* pair("c")
        const f = yield* pair("f")
        const r = yield* pair("r")
        const e = yield* pair("e")
        const z = yield* pair("z")
        return {
          completeMany: yield* repo.completeMany(c),
          failMany: yield* repo.failMany(f.map((claim) => ({ claim, error: "x", next: { _tag: "Dead" } as const }))),
          releaseMany: yield* repo.releaseMany(r),
          snoozeMany: yield* repo.snoozeMany(z.map((claim) => ({ claim, delay: 0 }))),
          extendMany: yield* repo.extendMany(e, "1 minute")
        }
      }))
      report(`batch results (${backend.name})`, {
        completeMany: results.completeMany.join("/"),
        failMany: results.failMany.join("/"),
        releaseMany: results.releaseMany.join("/"),
        snoozeMany: results.snoozeMany.join("/"),
        extendMany: results.extendMany.join("/")
      })
      expect(results).toEqual({
        completeMany: [false, true],
        failMany: ["stale", "dead"],
        releaseMany: ["stale", "released"],
        snoozeMany: ["stale", "snoozed"],
        extendMany: [false, true]
      })
    } finally {
      await runtime.dispose()
    }
  }, 60_000)

const RUNS = Number(process.env.RELIABILITY_MODEL_RUNS ?? 150)

const property = (backend: Backend) => {
  let runtime: Runtime | undefined
  afterAll(async () => {
    await runtime?.dispose()
    await backend.cleanup()
  })
  it(`agrees with the model at every step (${RUNS} random sequences of up to 40 steps)`, async () => {
    runtime = ManagedRuntime.make(repoLayer(await backend.fresh()))
    const seed = Number(process.env.RELIABILITY_MODEL_SEED ?? Date.now() % 2_147_483_647)
    const totals: Totals = { steps: 0, claims: 0, limits: 0, replaced: 0, cancelledByReplace: 0 }
    const started = performance.now()
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40, size: "max" }), (ops) => sequence(runtime!, ops, totals)),
      { numRuns: RUNS, seed, endOnFailure: false }
    )
    report(`model (${backend.name})`, {
      sequences: RUNS,
      steps: totals.steps,
      claims: totals.claims,
      "limits set": totals.limits,
      replaced: totals.replaced,
      "cancelled by replaceRunning": totals.cancelledByReplace,
      seed,
      seconds: Math.round((performance.now() - started) / 100) / 10,
      disagreements: 0
    })
  }, 240_000)
}

export const modelScenario = () =>
  describe("model-based: the repository against an in-memory model", () => {
    describe("on SQLite", () => {
      const backend = sqliteBackend()
      property(backend)
      batchResults(backend)
    })
    describe.skipIf(!pgAvailable)("on PostgreSQL", () => {
      const backend = pgBackend()
      property(backend)
      batchResults(backend)
    })
  })
