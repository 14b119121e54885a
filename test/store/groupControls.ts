/**
 * Groups of a kind, the claim's side of issue 36, from the shared store suite
 * (registered by ./groups.ts for every backend): a person pausing and resuming
 * one group; what a failure (onFailure) and a dead item (onDead) do to their
 * group; a per-group rate, its overshoot counted from the starts' rows; a
 * person's setting of the group limits winning over declarations. Time
 * is moved by editing rows, never by sleeping.
 */
import { expect, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { InvalidInput } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, countAll, makeDue, unsafe } from "../support/db.js"
import { withRepo } from "../support/harness.js"

const Repo = QueueRepo.QueueRepo

const claim = (limit = 100) =>
  Effect.flatMap(Repo, (repo) => repo.claim({ worker: "w", limit, lease: "1 minute", kinds: ["g"] }))

// Items of kind "g", each with its payload naming it: [group, n] pairs.
const enqueue = (items: ReadonlyArray<readonly [string | null, number]>) =>
  Effect.flatMap(Repo, (repo) =>
    repo.enqueueMany(items.map(([group, n]) => ({ kind: "g", payload: { group, n }, ...(group === null ? {} : { group }) }))))

const names = (claims: ReadonlyArray<QueueRepo.Claim>) =>
  claims.map((c) => {
    const p = JSON.parse(c.payloadJson) as { group: string | null; n: number }
    return `${p.group ?? "-"}${p.n}`
  }).sort()

const completeAll = (claims: ReadonlyArray<QueueRepo.Claim>) => Effect.flatMap(Repo, (repo) => repo.completeMany(claims))

// What is stored: the paused groups and the kind's count of them.
const pausedRows = Effect.gen(function*() {
  const groups = yield* unsafe<{ kind: string; group_key: string }>(
    "SELECT kind, group_key FROM docket_groups ORDER BY kind, group_key"
  )
  const counts = yield* unsafe<{ kind: string; n: number | string }>(
    "SELECT kind, paused_groups AS n FROM docket_kinds WHERE paused_groups <> 0 ORDER BY kind"
  )
  return {
    groups: groups.map((g) => `${g.kind}/${g.group_key}`),
    counts: counts.map((c) => `${c.kind}:${Number(c.n)}`)
  }
})

/** Registers the tests for a backend (inside ./groups.ts's describe). */
export const groupControlsSuite = (backend: Backend) => {
  it.live("pause one group: none of its items start while the other groups' do; running ones finish; resume starts them", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.declarePerGroup("g", { concurrency: 1 })
      yield* enqueue([["a", 1], ["a", 2], ["b", 1], ["b", 2], [null, 1]])
      const first = yield* claim()
      expect(names(first)).toEqual(["-1", "a1", "b1"])
      yield* repo.pauseGroup("g", "a")
      // a1 runs on and finishes; a2 does not start; b goes on.
      yield* completeAll(first)
      expect(names(yield* claim())).toEqual(["b2"])
      // Enqueues into a paused group are kept (and not started).
      yield* enqueue([["a", 3]])
      expect(yield* claim()).toEqual([])
      expect(yield* pausedRows).toEqual({ groups: ["g/a"], counts: ["g:1"] })
      yield* repo.resumeGroup("g", "a")
      expect(yield* pausedRows).toEqual({ groups: [], counts: [] })
      expect(names(yield* claim())).toEqual(["a2"])
    })))

  it.live("a kind without perGroup: a paused group's items are held back, its other groups and ungrouped items are not", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.pauseGroup("g", "a")
      yield* enqueue([["a", 1], ["a", 2], ["b", 1], ["b", 2], [null, 1], [null, 2]])
      // No group limit: b's two items start together; a's none.
      const claimed = yield* claim()
      expect(names(claimed)).toEqual(["-1", "-2", "b1", "b2"])
      expect(yield* claim()).toEqual([])
      // Another kind is not touched by g's paused group.
      yield* repo.enqueue("other", {}, { group: "a" })
      expect((yield* repo.claim({ worker: "w", limit: 10, lease: "1 minute" })).map((c) => c.kind)).toEqual(["other"])
      yield* repo.resumeGroup("g", "a")
      expect(names(yield* claim())).toEqual(["a1", "a2"])
      // With no paused group left, the kind is claimed as before (the general walk).
      expect(yield* pausedRows).toEqual({ groups: [], counts: [] })
    })))

  it.live("pausing twice, resuming twice, several groups: the kind's count of paused groups stays exact", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.pauseGroup("g", "a")
      yield* repo.pauseGroup("g", "a")
      yield* repo.pauseGroup("g", "b")
      yield* repo.pauseGroup("h", "a")
      expect(yield* pausedRows).toEqual({ groups: ["g/a", "g/b", "h/a"], counts: ["g:2", "h:1"] })
      yield* repo.resumeGroup("g", "a")
      yield* repo.resumeGroup("g", "a")
      yield* repo.resumeGroup("g", "never-paused")
      yield* repo.resumeGroup("unknown-kind", "a")
      expect(yield* pausedRows).toEqual({ groups: ["g/b", "h/a"], counts: ["g:1", "h:1"] })
      // Concurrent pauses and resumes of one kind's groups.
      yield* Effect.all(
        Array.from({ length: 20 }, (_, n) => repo.pauseGroup("k", `x${n % 5}`)),
        { concurrency: "unbounded" }
      )
      yield* Effect.all(
        Array.from({ length: 6 }, (_, n) => repo.resumeGroup("k", `x${n % 3}`)),
        { concurrency: "unbounded" }
      )
      expect((yield* pausedRows).counts).toEqual(["g:1", "h:1", "k:2"])
    })))

  it.live("bad input: an empty or over-long kind or group is an InvalidInput naming it, and nothing is written", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const cases: ReadonlyArray<readonly [string, string, string]> = [
        ["", "a", "kind"],
        ["x".repeat(129), "a", "kind"],
        ["g", "", "group"],
        ["g", "x".repeat(513), "group"]
      ]
      for (const [kind, group, field] of cases) {
        for (const op of [repo.pauseGroup(kind, group), repo.resumeGroup(kind, group)]) {
          const error = yield* Effect.flip(op)
          expect(error).toBeInstanceOf(InvalidInput)
          expect((error as InvalidInput).field).toBe(field)
        }
      }
      expect(yield* pausedRows).toEqual({ groups: [], counts: [] })
      const kinds = yield* unsafe<{ n: number | string }>("SELECT count(*) AS n FROM docket_kinds")
      expect(Number(kinds[0].n)).toBe(0)
      expect(yield* countAll).toBe(0)
      // The longest group is accepted.
      yield* repo.pauseGroup("g", "x".repeat(512))
      expect((yield* pausedRows).counts).toEqual(["g:1"])
    })))

  it.live("onFailure continue: an ordered group's failed item waiting for its retry does not hold the items behind it; once due it runs at its place", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.declarePerGroup("g", { concurrency: 1, ordered: true, onFailure: "continue" })
      const [a1, a2, a3] = yield* enqueue([["a", 1], ["a", 2], ["a", 3]])
      const [first] = yield* claim()
      expect(first.id).toBe(a1.id)
      expect(yield* repo.fail(first, "boom", { _tag: "Retry", delay: "1 hour" })).toBe("retried")
      // a1 waits for its backoff; a2 goes on (with "wait" it would not: ./groups.ts).
      const [second] = yield* claim()
      expect(second.id).toBe(a2.id)
      expect(yield* claim()).toEqual([])
      // a1 due again while a2 runs: still one at a time.
      yield* makeDue(a1.id)
      expect(yield* claim()).toEqual([])
      yield* completeAll([second])
      // a1 is back at its place, ahead of a3.
      const [third] = yield* claim()
      expect([third.id, third.attempt]).toEqual([a1.id, 2])
      yield* completeAll([third])
      expect((yield* claim()).map((c) => c.id)).toEqual([a3.id])
    })))

  it.live("onDead hold: a group with a dead item starts nothing until a person retries or deletes it; the other groups go on", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      yield* repo.declarePerGroup("g", { concurrency: 1, onDead: "hold" })
      const [a1, a2, , b2] = yield* enqueue([["a", 1], ["a", 2], ["b", 1], ["b", 2]])
      const first = yield* claim()
      expect(names(first)).toEqual(["a1", "b1"])
      const dying = first.find((c) => c.id === a1.id)!
      expect(yield* repo.fail(dying, "fatal", { _tag: "Dead" })).toBe("dead")
      yield* completeAll(first.filter((c) => c.id !== a1.id))
      // a is held by its dead item; b goes on.
      expect((yield* claim()).map((c) => c.id)).toEqual([b2.id])
      expect(yield* claim()).toEqual([])
      // A retry puts it back: the group runs again (unordered: a1 and a2 by claim order, one at a time).
      expect(yield* repo.retryDead({ ids: [a1.id] })).toEqual([a1.id])
      const [next] = yield* claim()
      expect([a1.id, a2.id]).toContain(next.id)
      expect(yield* claim()).toEqual([])
      // Dead again: held again; a delete of the dead item releases the group.
      expect(yield* repo.fail(next, "fatal", { _tag: "Dead" })).toBe("dead")
      expect(yield* claim()).toEqual([])
      expect(yield* repo.deleteDead({ ids: [next.id] })).toEqual([next.id])
      const [last] = yield* claim()
      expect(last.id).toBe(next.id === a1.id ? a2.id : a1.id)
      // "release" (the default) lets the group go on past a dead item.
      yield* repo.declarePerGroup("g", { concurrency: 1 })
      yield* enqueue([["c", 1], ["c", 2]])
      const [c1] = (yield* claim()).filter((c) => c.group === "c")
      yield* repo.fail(c1, "fatal", { _tag: "Dead" })
      expect(names((yield* claim()).filter((c) => c.group === "c"))).toEqual(["c2"])
    })))

  it.live("bad onFailure or onDead: an InvalidInput on perGroup naming it, nothing written", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const bad = [
        [{ concurrency: 1, onFailure: "skip" }, /onFailure must be "wait" or "continue"/],
        [{ concurrency: 1, onDead: "keep" }, /onDead must be "release" or "hold"/]
      ] as const
      for (const [perGroup, reason] of bad) {
        const error = yield* Effect.flip(repo.declarePerGroup("g", perGroup as unknown as QueueRepo.PerGroup))
        expect(error).toBeInstanceOf(InvalidInput)
        expect((error as InvalidInput).field).toBe("perGroup")
        expect((error as InvalidInput).reason).toMatch(reason)
      }
      const kinds = yield* unsafe<{ n: number | string }>("SELECT count(*) AS n FROM docket_kinds")
      expect(Number(kinds[0].n)).toBe(0)
      // A good declaration is stored as given; a change of one setting alone is a change.
      expect(yield* repo.declarePerGroup("g", { concurrency: 2, onFailure: "continue", onDead: "hold" })).toBe(true)
      expect(yield* repo.declarePerGroup("g", { concurrency: 2, onFailure: "continue", onDead: "hold" })).toBe(false)
      expect(yield* repo.declarePerGroup("g", { concurrency: 2, onFailure: "continue" })).toBe(true)
      const [row] = yield* unsafe<{ f: string; d: string }>(
        "SELECT group_on_failure AS f, group_on_dead AS d FROM docket_kinds WHERE kind = 'g'"
      )
      expect(row).toEqual({ f: "continue", d: "release" })
    })))

  it.live("rate: at most N starts of one group in any window of the period; the other groups have their own; starts leaving the window free places", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const hour = 3_600_000
      yield* repo.declarePerGroup("g", { concurrency: 10, rate: { limit: 2, period: "1 hour" } })
      yield* enqueue([["a", 1], ["a", 2], ["a", 3], ["a", 4], ["b", 1], ["b", 2], ["b", 3], [null, 1]])
      const first = yield* claim()
      // Ungrouped items are not limited by perGroup.
      expect(names(first)).toEqual(["-1", "a1", "a2", "b1", "b2"])
      yield* completeAll(first)
      // Finished or not, the starts count for the hour.
      expect(yield* claim()).toEqual([])
      // A pool held back by the rate sleeps until the oldest start leaves its window, not for a poll.
      const wait = Option.getOrThrow(yield* repo.nextDueIn)
      expect(Duration.toMillis(wait)).toBeGreaterThan(hour - 60_000)
      expect(Duration.toMillis(wait)).toBeLessThanOrEqual(hour)
      // a's starts an hour older: they left the window, so a may start two more; b still none.
      yield* unsafe(`UPDATE docket_group_starts SET started_at = started_at - ${hour} WHERE group_key = 'a'`)
      const more = yield* claim()
      expect(names(more)).toEqual(["a3", "a4"])
      // The overshoot, counted from the rows: no window of an hour ending at a start holds more than 2 of a group.
      const rows = yield* unsafe<{ group_key: string; started_at: number | string }>(
        "SELECT group_key, started_at FROM docket_group_starts ORDER BY group_key, started_at"
      )
      for (const row of rows) {
        const t = Number(row.started_at)
        const inWindow = rows.filter((r) => r.group_key === row.group_key && Number(r.started_at) > t - hour && Number(r.started_at) <= t)
        expect(inWindow.length).toBeLessThanOrEqual(2)
      }
      // The starts that left the window were forgotten at the group's next claim.
      expect(rows.map((r) => r.group_key)).toEqual(["a", "a", "b", "b"])
    })))

  it.live("a per-group rate alone (a person's, no per-group concurrency) holds each group to it; the kind's other groups and ungrouped items are not held", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      // Before migration 0020 a kind counted as grouped only with a per-group
      // concurrency or a paused group: this rate was stored, shown, and not obeyed.
      yield* repo.setGroupLimits("g", { rate: { limit: 1, period: "1 hour" } })
      yield* enqueue([["a", 1], ["a", 2], ["a", 3], ["b", 1], ["b", 2], [null, 1], [null, 2]])
      const first = yield* claim()
      expect(names(first)).toEqual(["-1", "-2", "a1", "b1"])
      // Running or finished, a start counts for the hour: the concurrency does not limit it, the rate does.
      expect(yield* claim()).toEqual([])
      yield* completeAll(first)
      expect(yield* claim()).toEqual([])
      yield* unsafe(`UPDATE docket_group_starts SET started_at = started_at - 3600000 WHERE group_key = 'b'`)
      expect(names(yield* claim())).toEqual(["b2"])
    })))

  it.live("bad rate: without a period, a limit of 0: an InvalidInput on perGroup naming the member, nothing written", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const bad = [
        [{ limit: 5 }, /^rate\.period must be a duration/],
        [{ limit: 0, period: "1 second" }, /^rate\.limit must be/],
        [{ limit: 5, period: "40 days" }, /^rate\.period must be/],
        ["5/1s", /^rate must be \{ limit, period \}/]
      ] as const
      for (const [rate, reason] of bad) {
        const error = yield* Effect.flip(repo.declarePerGroup("g", { concurrency: 1, rate: rate as unknown as QueueRepo.Rate }))
        expect(error).toBeInstanceOf(InvalidInput)
        expect((error as InvalidInput).field).toBe("perGroup")
        expect((error as InvalidInput).reason).toMatch(reason)
      }
      const kinds = yield* unsafe<{ n: number | string }>("SELECT count(*) AS n FROM docket_kinds")
      expect(Number(kinds[0].n)).toBe(0)
    })))

  it.live("a person's group limits win over handlers' declarations until reset; the declarations' other settings still apply", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const row = Effect.map(
        unsafe<{ c: number | null; r: number | null; p: number | string | null; by: string; dead: string }>(
          `SELECT group_concurrency AS c, group_rate_limit AS r, group_rate_period_ms AS p, group_limits_set_by AS by,
             group_on_dead AS dead FROM docket_kinds WHERE kind = 'g'`
        ),
        ([r]) => ({ ...r, p: r.p === null ? null : Number(r.p) })
      )
      yield* repo.declarePerGroup("g", { concurrency: 3 })
      yield* repo.setGroupLimits("g", { concurrency: 1, rate: { limit: 10, period: "1 minute" } })
      expect(yield* row).toEqual({ c: 1, r: 10, p: 60_000, by: "person", dead: "release" })
      // A worker starting with its declaration: the person's limits are kept, the rest is written.
      expect(yield* repo.declarePerGroup("g", { concurrency: 3, onDead: "hold" })).toBe(true)
      expect(yield* row).toEqual({ c: 1, r: 10, p: 60_000, by: "person", dead: "hold" })
      yield* enqueue([["a", 1], ["a", 2]])
      expect((yield* claim()).length).toBe(1)
      // One kept (undefined), one removed (null).
      yield* repo.setGroupLimits("g", { rate: null })
      expect(yield* row).toMatchObject({ c: 1, r: null, p: null, by: "person" })
      // Reset hands them back: none until a declaration, which then writes its own.
      yield* repo.resetKindLimits("g")
      expect(yield* row).toMatchObject({ c: null, r: null, by: "code" })
      yield* repo.declarePerGroup("g", { concurrency: 3, onDead: "hold" })
      expect(yield* row).toMatchObject({ c: 3, r: null, by: "code" })
      expect((yield* claim()).length).toBe(1)
    })))

  it.live("a person's bad group limits: an InvalidInput on perGroup naming the value, nothing written", () =>
    withRepo(backend, Effect.gen(function*() {
      const repo = yield* Repo
      const bad: ReadonlyArray<readonly [QueueRepo.GlobalLimits, RegExp]> = [
        [{ concurrency: 0 }, /^concurrency must be/],
        [{ concurrency: 10_001 }, /^concurrency must be/],
        [{ rate: { limit: 5 } as unknown as QueueRepo.Rate }, /^rate must be a duration/],
        [{ rate: { limit: 0, period: "1 second" } }, /^rate must be/],
        [{}, /give a concurrency or a rate/]
      ]
      for (const [limits, reason] of bad) {
        const error = yield* Effect.flip(repo.setGroupLimits("g", limits))
        expect(error).toBeInstanceOf(InvalidInput)
        expect((error as InvalidInput).field).toBe("perGroup")
        expect((error as InvalidInput).reason).toMatch(reason)
      }
      const kinds = yield* unsafe<{ n: number | string }>("SELECT count(*) AS n FROM docket_kinds")
      expect(Number(kinds[0].n)).toBe(0)
    })))
}
