/**
 * `QueueRepo.listGroups` (`docket group list`), run against every backend
 * from the shared store suite (./suite.ts): a kind's groups with unfinished
 * items, paged in group order, each with its counts, its first item and
 * whether a failure holds it; bad input; on PostgreSQL, the page is a seek
 * on the groups' index, not a scan.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { InvalidInput } from "../../src/Errors.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, makeDue, unsafe } from "../support/db.js"
import { withRepo } from "../support/harness.js"

const Repo = QueueRepo.QueueRepo
const lease = "1 minute"

export const groupListSuite = (backend: Backend) =>
  describe("listing a kind's groups", () => {
    it.live("pages in group order, every group once; counts, the first item, a failure holding an ordered group", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        yield* repo.declarePerGroup("g", { concurrency: 1, ordered: true })
        const items = yield* repo.enqueueMany([
          { kind: "g", payload: 1, group: "c" },
          { kind: "g", payload: 2, group: "a" },
          { kind: "g", payload: 3, group: "a" },
          { kind: "g", payload: 4, group: "b", delay: "1 hour" },
          { kind: "g", payload: 5, group: "d" },
          { kind: "g", payload: 6 },
          { kind: "other", payload: 7, group: "a" }
        ])
        // a's first item runs; c's first item fails once and waits for its retry; d's is done.
        const claimed = yield* repo.claim({ worker: "w", limit: 10, lease, kinds: ["g"] })
        const byGroup = new Map(claimed.map((c) => [c.group, c]))
        expect([...byGroup.keys()].map(String).sort()).toEqual(["a", "c", "d", "null"])
        expect(yield* repo.fail(byGroup.get("c")!, "Retry: refused", { _tag: "Retry", delay: 3_600_000 })).toBe("retried")
        yield* repo.completeMany([byGroup.get("d")!, byGroup.get(null)!])

        const first = yield* repo.listGroups("g", { limit: 2 })
        expect(first.groups.map((g) => g.group)).toEqual(["a", "b"])
        expect(first.cursor).toBe("b")
        const second = yield* repo.listGroups("g", { limit: 2, after: first.cursor! })
        expect(second.groups.map((g) => g.group)).toEqual(["c"])
        expect(second.cursor).toBeNull()

        const [a, b] = first.groups
        expect(a).toMatchObject({
          counts: { due: 1, scheduled: 0, running: 1, retrying: 0 },
          head: { id: items[1].id, state: "running", attempts: 1 },
          blocked: false
        })
        expect(b).toMatchObject({ counts: { due: 0, scheduled: 1, running: 0, retrying: 0 }, blocked: false })
        expect(b.nextDueAt).toBeGreaterThan(Date.now() + 3_000_000)
        expect(second.groups[0]).toMatchObject({
          counts: { due: 0, scheduled: 1, running: 0, retrying: 1 },
          head: { id: items[0].id, state: "waiting", attempts: 1, lastError: "Retry: refused" },
          blocked: true
        })
        // Due again, it still holds its group until it has run.
        yield* makeDue(items[0].id)
        const again = yield* repo.listGroups("g")
        expect(again.groups.find((g) => g.group === "c")).toMatchObject({ counts: { due: 1, retrying: 1 }, blocked: true })
        // Unordered, a failed first item holds nothing.
        yield* repo.declarePerGroup("g", { concurrency: 1, ordered: false })
        expect((yield* repo.listGroups("g")).groups.find((g) => g.group === "c")?.blocked).toBe(false)
        // Another kind's groups are its own.
        expect((yield* repo.listGroups("other")).groups.map((g) => g.group)).toEqual(["a"])
        expect(yield* repo.listGroups("none")).toEqual({ groups: [], cursor: null })
      })))

    it.live("bad input: a bad kind, limit or cursor is a typed error naming it", () =>
      withRepo(backend, Effect.gen(function*() {
        const repo = yield* Repo
        const fields = []
        for (const [kind, options] of [["", {}], ["g", { limit: 0 }], ["g", { limit: 1001 }], ["g", { after: "" }]] as const) {
          const error = yield* Effect.flip(repo.listGroups(kind, options))
          expect(error).toBeInstanceOf(InvalidInput)
          fields.push((error as InvalidInput).field)
        }
        expect(fields).toEqual(["kind", "limit", "limit", "cursor"])
      })))

    if (backend.name === "pg") {
      it.live("PostgreSQL: a page is a seek on the groups' index from the cursor, not a scan of the kind's items", () =>
        withRepo(backend, Effect.gen(function*() {
          yield* unsafe(`INSERT INTO docket_items (kind, payload, priority, run_at, created_at, updated_at, group_key)
            SELECT 'g', '1', 0, 0, 0, 0, 'group-' || lpad((n % 5000)::text, 5, '0') FROM generate_series(1, 20000) AS n`)
          yield* unsafe("ANALYZE docket_items")
          const { pg } = yield* Effect.promise(() => import("../../src/internal/sql/groupList.js"))
          const plan = yield* unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${pg}`, ["g", "group-02500", 100])
          const text = plan.map((r) => r["QUERY PLAN"]).join("\n")
          expect(text).toMatch(/Index (Only )?Scan using docket_items_group /)
          expect(text).not.toMatch(/Seq Scan on docket_items/)
        })))
    }
  })
