/**
 * Model-based test of groups (fast-check; issue 36): random sequences of
 * enqueue (into groups a, b, c or none, with delays and priorities), claim,
 * complete, fail (retry after a backoff, or dead), release, snooze, a
 * person's cancel, pause and resume of a group, retry and delete of a dead
 * item, and time moving forward, on one kind whose `perGroup` is drawn for
 * the sequence (concurrency 1-3, ordered or not, onDead "release" or
 * "hold"), against the real
 * `QueueRepo` on SQLite and PostgreSQL. The model is of what a claim may take,
 * read from the stored rows just before it (model.ts keeps the full state
 * machine; here the rows are the state, and the claim is what is judged):
 *
 * - a paused group (the model's own record of the pauses and resumes) and,
 *   with onDead "hold", a group with a dead item (read from the rows) start
 *   nothing; the kind's count of paused groups is the model's after each
 *   pause and resume;
 * - every item a claim takes is one the group's rules allow: a group has
 *   fewer than N live leases; ordered, only the group's first N unfinished
 *   items (by id) may run, and not past one waiting for its due time;
 * - a claim takes as many as it may: min(limit, every group's free places
 *   filled with what it allows + the kind's ungrouped claimable items);
 * - ordered, a group's items are taken from its head, in id order;
 * - after the claim no group holds more than N live leases.
 *
 * Time moves as in model.ts: by whole minutes, every stored time moved back.
 */
import { SqlClient } from "@effect/sql"
import { Effect, ManagedRuntime } from "effect"
import fc from "fast-check"
import { afterAll, describe, expect, it } from "vitest"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, itemTables, pgAvailable, pgBackend, repoLayer, sqliteBackend } from "../support/db.js"
import { report } from "./support.js"

const MINUTE = 60_000
const GROUPS = ["a", "b", "c"] as const

type Op =
  | { op: "enqueue"; group: string | null; delay: number; priority: number }
  | { op: "claim"; limit: number; lease: number }
  | { op: "complete" | "release" | "dead" | "cancel"; pick: number }
  | { op: "retry" | "snooze"; pick: number; delay: number }
  | { op: "advance"; by: number }
  | { op: "pause" | "resume"; group: string }
  | { op: "deadRetry" | "deadDelete"; pick: number }

const minutes = (min: number, max: number) => fc.integer({ min, max }).map((m) => m * MINUTE)
const pick = fc.nat({ max: 1000 })
const delay = fc.oneof(fc.constant(0), minutes(1, 3))

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant("enqueue" as const),
      group: fc.constantFrom<string | null>(...GROUPS, ...GROUPS, null),
      delay: fc.oneof(fc.constant(0), fc.constant(0), minutes(1, 3)),
      priority: fc.integer({ min: -1, max: 1 })
    })
  },
  { weight: 5, arbitrary: fc.record({ op: fc.constant("claim" as const), limit: fc.integer({ min: 1, max: 5 }), lease: minutes(1, 3) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constantFrom("complete" as const, "release" as const, "dead" as const, "cancel" as const), pick }) },
  // More deaths than the others' share: a dead item holding its group (onDead "hold") must meet later claims.
  { weight: 1, arbitrary: fc.record({ op: fc.constant("dead" as const), pick }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom("retry" as const, "snooze" as const), pick, delay }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("advance" as const), by: minutes(1, 4) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom("pause" as const, "resume" as const), group: fc.constantFrom(...GROUPS) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom("deadRetry" as const, "deadDelete" as const), pick }) }
)

/** A sequence's kind settings. */
interface PerGroup {
  readonly concurrency: number
  readonly ordered: boolean
  readonly onDead: "release" | "hold"
}

interface Row {
  readonly id: number
  readonly group: string | null
  readonly state: "waiting" | "running"
  readonly runAt: number
  readonly leaseUntil: number | null
}

/**
 * What a claim at `now` may take, from the kind's unfinished rows: each
 * group's allowed items in order and free places (none for a group in
 * `stopped`: paused, or held by a dead item), and the ungrouped claimable.
 */
export const allowed = (
  rows: ReadonlyArray<Row>,
  now: number,
  concurrency: number,
  ordered: boolean,
  stopped: ReadonlySet<string> = new Set()
) => {
  const claimable = (r: Row) => (r.state === "waiting" && r.runAt <= now) || (r.state === "running" && r.leaseUntil! <= now)
  const live = (r: Row) => r.state === "running" && r.leaseUntil! > now
  const groups = new Map<string, { readonly free: number; readonly items: ReadonlyArray<number> }>()
  for (const group of new Set(rows.flatMap((r) => (r.group === null ? [] : [r.group])))) {
    const unfinished = rows.filter((r) => r.group === group).sort((x, y) => x.id - y.id)
    const free = concurrency - unfinished.filter(live).length
    let items: Array<number>
    if (stopped.has(group)) items = []
    else if (!ordered) items = unfinished.filter(claimable).map((r) => r.id)
    else {
      items = []
      for (const r of unfinished.slice(0, concurrency)) {
        // Strict: nothing behind an item that waits for its due time.
        if (r.state === "waiting" && r.runAt > now) break
        if (claimable(r)) items.push(r.id)
      }
    }
    groups.set(group, { free, items })
  }
  const ungrouped = rows.filter((r) => r.group === null && claimable(r)).map((r) => r.id)
  return { groups, ungrouped }
}

type Runtime = ManagedRuntime.ManagedRuntime<QueueRepo.QueueRepo | SqlClient.SqlClient, unknown>

interface Totals {
  steps: number
  claimed: number
  fullClaims: number
  /** Claims made while some group was paused or held by a dead item. */
  stoppedClaims: number
}

const sequence = async (runtime: Runtime, perGroup: PerGroup, ops: ReadonlyArray<Op>, totals: Totals) => {
  const run = <A, E>(effect: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>) => runtime.runPromise(effect)
  const repo = <A, E>(f: (r: QueueRepo.Service) => Effect.Effect<A, E>) => run(Effect.flatMap(QueueRepo.QueueRepo, f))
  const sql = <A extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
    run(Effect.flatMap(SqlClient.SqlClient, (s) =>
      s.unsafe<A>(s.onDialectOrElse({ pg: () => text, orElse: () => text.replace(/\$\d+/g, "?") }), params)))
  for (const table of await run(itemTables)) await sql(`DELETE FROM ${table}`)
  await sql("DELETE FROM docket_kinds")
  await sql("DELETE FROM docket_groups")
  const paused = new Set<string>()
  const dead = async () =>
    (await sql<{ id: number | string; group_key: string | null }>(
      "SELECT id, group_key FROM docket_items WHERE state = 'dead' ORDER BY id"
    )).map((r) => ({ id: Number(r.id), group: r.group_key }))
  // The groups that start nothing now: paused, or (onDead "hold") with a dead item.
  const stopped = async () => {
    const held = perGroup.onDead === "hold" ? (await dead()).flatMap((d) => (d.group === null ? [] : [d.group])) : []
    return new Set([...paused, ...held])
  }
  const pausedCount = async () =>
    Number((await sql<{ n: number | string }>("SELECT paused_groups AS n FROM docket_kinds WHERE kind = 'g'"))[0]?.n ?? 0)
  await repo((r) => r.declarePerGroup("g", perGroup))
  const claims: Array<QueueRepo.Claim> = []
  const startedAt = Date.now()
  const rows = async () =>
    (await sql<{ id: number | string; group_key: string | null; state: Row["state"]; run_at: number | string; lease_until: number | string | null }>(
      "SELECT id, group_key, state, run_at, lease_until FROM docket_items WHERE state IN ('waiting', 'running') ORDER BY id"
    )).map((r): Row => ({
      id: Number(r.id),
      group: r.group_key,
      state: r.state,
      runAt: Number(r.run_at),
      leaseUntil: r.lease_until === null ? null : Number(r.lease_until)
    }))

  for (let s = 0; s < ops.length; s++) {
    const op = ops[s]
    const step = `perGroup ${JSON.stringify(perGroup)}, step ${s + 1} ${JSON.stringify(op)}`
    totals.steps++
    const claim = claims.length === 0 ? undefined : claims["pick" in op ? op.pick % claims.length : 0]
    switch (op.op) {
      case "enqueue":
        await repo((r) => r.enqueue("g", { s }, { delay: op.delay, priority: op.priority, ...(op.group === null ? {} : { group: op.group }) }))
        break
      case "claim": {
        const before = await rows()
        const stop = await stopped()
        if (stop.size > 0) totals.stoppedClaims++
        // Times differ by whole minutes: any instant of the claim's statement decides as this one.
        const may = allowed(before, Date.now(), perGroup.concurrency, perGroup.ordered, stop)
        const got = await repo((r) => r.claim({ worker: "w", limit: op.limit, lease: op.lease, kinds: ["g"] }))
        claims.push(...got)
        totals.claimed += got.length
        const fromGroups = [...may.groups.values()].reduce((n, g) => n + Math.min(Math.max(0, g.free), g.items.length), 0)
        const want = Math.min(op.limit, fromGroups + may.ungrouped.length)
        if (want === op.limit) totals.fullClaims++
        expect(got.length, `${step}: how many (allowed ${JSON.stringify([...may.groups])}, ungrouped ${may.ungrouped}, stopped ${[...stop]})`)
          .toBe(want)
        for (const [group, g] of may.groups) {
          const taken = got.filter((c) => c.group === group).map((c) => c.id).sort((x, y) => x - y)
          expect(taken.length, `${step}: group ${group} over its free places`).toBeLessThanOrEqual(Math.max(0, g.free))
          for (const id of taken) expect(g.items, `${step}: group ${group} item ${id} allowed`).toContain(id)
          if (perGroup.ordered) expect(taken, `${step}: group ${group} from its head`).toEqual(g.items.slice(0, taken.length))
        }
        for (const c of got.filter((c) => c.group === null)) expect(may.ungrouped, `${step}: ungrouped ${c.id}`).toContain(c.id)
        const after = await rows()
        const now = Date.now()
        for (const group of GROUPS) {
          const live = after.filter((r) => r.group === group && r.state === "running" && r.leaseUntil! > now).length
          expect(live, `${step}: live leases of ${group}`).toBeLessThanOrEqual(perGroup.concurrency)
        }
        break
      }
      case "complete":
        if (claim !== undefined) await repo((r) => r.complete(claim))
        break
      case "release":
        if (claim !== undefined) await repo((r) => r.release(claim))
        break
      case "dead":
        if (claim !== undefined) await repo((r) => r.fail(claim, "boom", { _tag: "Dead" }))
        break
      case "retry":
        if (claim !== undefined) await repo((r) => r.fail(claim, "boom", { _tag: "Retry", delay: op.delay }))
        break
      case "snooze":
        if (claim !== undefined) await repo((r) => r.snooze(claim, op.delay))
        break
      case "cancel":
        if (claim !== undefined) await repo((r) => r.cancel([claim.id]))
        break
      case "pause":
      case "resume":
        await repo((r) => (op.op === "pause" ? r.pauseGroup("g", op.group) : r.resumeGroup("g", op.group)))
        if (op.op === "pause") paused.add(op.group)
        else paused.delete(op.group)
        expect(await pausedCount(), `${step}: the kind's count of paused groups`).toBe(paused.size)
        break
      case "deadRetry":
      case "deadDelete": {
        const ids = await dead()
        if (ids.length === 0) break
        const id = ids[op.pick % ids.length].id
        const done = await repo((r) => (op.op === "deadRetry" ? r.retryDead({ ids: [id] }) : r.deleteDead({ ids: [id] })))
        expect(done, `${step}: dead item ${id}`).toEqual([id])
        break
      }
      case "advance":
        for (const table of await run(itemTables)) {
          await sql(`UPDATE ${table} SET run_at = run_at - $1, lease_until = lease_until - $2`, [op.by, op.by])
        }
        break
    }
  }
  // A sequence must finish well within a minute, or the real clock could matter.
  expect(Date.now() - startedAt, "a sequence takes less than 30 s").toBeLessThan(30_000)
}

const RUNS = Number(process.env.RELIABILITY_MODEL_RUNS ?? 100)

const property = (backend: Backend) => {
  let runtime: Runtime | undefined
  afterAll(async () => {
    await runtime?.dispose()
    await backend.cleanup()
  })
  it(`every claim takes what the group rules allow, as much as they allow (${RUNS} random sequences)`, async () => {
    runtime = ManagedRuntime.make(repoLayer(await backend.fresh()))
    const seed = Number(process.env.RELIABILITY_MODEL_SEED ?? Date.now() % 2_147_483_647)
    const totals: Totals = { steps: 0, claimed: 0, fullClaims: 0, stoppedClaims: 0 }
    const started = performance.now()
    const perGroupArb = fc.record({
      concurrency: fc.integer({ min: 1, max: 3 }),
      ordered: fc.boolean(),
      onDead: fc.constantFrom("release" as const, "hold" as const)
    })
    await fc.assert(
      fc.asyncProperty(perGroupArb, fc.array(opArb, { minLength: 1, maxLength: 40, size: "max" }), (perGroup, ops) =>
        sequence(runtime!, perGroup, ops, totals)),
      { numRuns: RUNS, seed, endOnFailure: false }
    )
    report(`group model (${backend.name})`, {
      sequences: RUNS,
      steps: totals.steps,
      claimed: totals.claimed,
      claimsFilled: totals.fullClaims,
      claimsWithAGroupStopped: totals.stoppedClaims,
      seed,
      seconds: Math.round((performance.now() - started) / 100) / 10,
      disagreements: 0
    })
  }, 240_000)
}

export const groupModelScenario = () =>
  describe("model-based: group claims against the group rules", () => {
    describe("on SQLite", () => property(sqliteBackend()))
    describe.skipIf(!pgAvailable)("on PostgreSQL", () => property(pgBackend()))
  })
