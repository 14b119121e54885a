/**
 * Enqueue: the dedupe insert protocol. A keyed row whose key a waiting item
 * holds is not inserted: with `onConflict` "keep" its result is that item
 * (Deduplicated); with "replace", "debounce" or "replaceRunning" that item
 * takes the row's payload and due time (Replaced), and "replaceRunning" also
 * cancels the key's running items. Rows without
 * a key are inserted in one statement, without the protocol's rounds. Under
 * an application's tracer each item stores the enqueue span's context, which
 * its run's span links to (internal/tracing.ts).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { EnqueueResult } from "../../Domain.js"
import type { InvalidInput, StorageError } from "../../Errors.js"
import type { Service } from "./service.js"
import type * as Wakeups from "../../Wakeups.js"
import type { InsertRow } from "../sql/itemInsertMany.js"
import { type KeyRow, num } from "../sql/rows.js"
import type { Storage } from "../storage.js"
import { spanWithContextIfTraced } from "../tracing.js"
import { cancelError } from "./cancel.js"
import { storage } from "./decode.js"
import type { Prepare } from "./prepare.js"

/** The operations an enqueue runs. */
type Insert = Pick<
  Storage,
  "itemInsertMany" | "itemFindWaiting" | "itemReplaceWaiting" | "itemFindRunning" | "itemCancelMany" | "atomic"
>

/** `enqueue` and `enqueueMany` over the storage; this process's pools hear of new items through `wakeups`. */
export const make = (
  store: Insert,
  wakeups: Wakeups.Service,
  prepare: Prepare
): Pick<Service, "enqueue" | "enqueueMany"> => {
  const enqueueRows = inserter(store, wakeups)
  return {
    enqueue: (kind, payload, opts = {}) =>
      spanWithContextIfTraced(
        "docket.enqueue",
        { attributes: { kind }, kind: "producer", captureStackTrace: false },
        // Called when the enqueue runs (tracerWith defers it): no suspend needed.
        (traceContext): Effect.Effect<EnqueueResult, InvalidInput | StorageError> => {
          const row = prepare({ ...opts, kind, payload }, null)
          if (Either.isLeft(row)) return Effect.fail(row.left)
          return Effect.map(enqueueRows([row.right], traceContext), (results) => results[0])
        }
      ),
    enqueueMany: (requests) =>
      spanWithContextIfTraced(
        "docket.enqueueMany",
        { attributes: { count: requests.length }, kind: "producer", captureStackTrace: false },
        (traceContext): Effect.Effect<ReadonlyArray<EnqueueResult>, InvalidInput | StorageError> => {
          const list = Array.isArray(requests) ? requests : Array.from(requests)
          const rows: Array<InsertRow> = new Array(list.length)
          for (let i = 0; i < list.length; i++) {
            const row = prepare(list[i], i)
            if (Either.isLeft(row)) return Effect.fail(row.left)
            rows[i] = row.right
          }
          return enqueueRows(rows, traceContext)
        }
      )
  }
}

// The insert of checked rows, with dedupe, then the wake-up: results in input order.
const inserter = (store: Insert, wakeups: Wakeups.Service) => {
  // Rounds until every row has its result. Each round replaces the waiting
  // items of its replacing rows, inserts the rest, then looks up the waiting
  // item of each "keep" row that was skipped (Deduplicated). A row left
  // without a result goes to the next round: a replacing row whose insert
  // was skipped (a waiting item appeared after its replace looked: the next
  // replace finds it), a "keep" row whose waiting item was claimed in
  // between (nothing waits: the next insert adds it). So every result is a
  // new item, or one that waited. On PostgreSQL each statement is atomic on
  // its own and the rounds need no transaction; on SQLite they run in one.
  const insertAll = (
    rows: ReadonlyArray<InsertRow>,
    traceContext: string | null
  ): Effect.Effect<ReadonlyArray<EnqueueResult>, SqlError> =>
    Effect.gen(function*() {
      const results: Array<EnqueueResult | undefined> = new Array(rows.length)
      let pending = rows.map((_, i) => i)
      for (let idle = 0; pending.length > 0;) {
        if (idle === 5) {
          return yield* Effect.die(new Error("enqueue: a keyed item kept changing state while enqueuing"))
        }
        const { now, later } = splitRound(rows, pending)
        const rest = yield* replaceRound(rows, now, results, traceContext)
        const inserted = rest.length === 0 ? [] : yield* store.itemInsertMany(rest.map((i) => rows[i]), traceContext)
        const skipped = matchInserted(rows, rest, inserted, results)
        const retry = skipped.filter((i) => replacing(rows[i]))
        const kept = skipped.filter((i) => !replacing(rows[i]))
        if (kept.length > 0) {
          const pairs = kept.map((i) => [rows[i].kind, rows[i].key!] as const)
          const waiting = yield* store.itemFindWaiting(pairs)
          const byPair = new Map(waiting.map((w) => [pairKey(w.kind, w.dedupe_key!), num(w.id)]))
          for (const i of kept) {
            const id = byPair.get(pairKey(rows[i].kind, rows[i].key!))
            if (id === undefined) retry.push(i)
            else results[i] = { _tag: "Deduplicated", id }
          }
        }
        idle = retry.length === now.length ? idle + 1 : 0
        pending = retry.length === 0 ? later : [...retry, ...later].sort((a, b) => a - b)
      }
      yield* cancelRunning(rows, results)
      return results as ReadonlyArray<EnqueueResult>
    })

  // The round's replacing rows change the waiting items of their keys
  // (Replaced); returns the round's other rows, in input order, to insert.
  const replaceRound = (
    rows: ReadonlyArray<InsertRow>,
    round: ReadonlyArray<number>,
    results: Array<EnqueueResult | undefined>,
    traceContext: string | null
  ): Effect.Effect<ReadonlyArray<number>, SqlError> => {
    const replacers = round.filter((i) => replacing(rows[i]))
    if (replacers.length === 0) return Effect.succeed(round)
    return Effect.map(store.itemReplaceWaiting(replacers.map((i) => rows[i]), traceContext), (replaced) => {
      const byPair = new Map(replaced.map((r) => [pairKey(r.kind, r.dedupe_key!), num(r.id)]))
      const rest: Array<number> = []
      for (const i of round) {
        const id = replacing(rows[i]) ? byPair.get(pairKey(rows[i].kind, rows[i].key!)) : undefined
        if (id === undefined) rest.push(i)
        else results[i] = { _tag: "Replaced", id }
      }
      return rest
    })
  }

  // "replaceRunning": the running items of each such row's kind and key are
  // cancelled (as `cancel` cancels: fenced, their runs interrupted), except
  // the item the batch's last row of that key stands for (on PostgreSQL a
  // worker may have claimed it already: it is the new payload, running).
  // Done after the replace, so no claim can take an older payload in
  // between; the cancelled ids go on the last such row's result.
  const cancelRunning = (rows: ReadonlyArray<InsertRow>, results: Array<EnqueueResult | undefined>) =>
    Effect.gen(function*() {
      const last = new Map<string, number>()
      for (let i = 0; i < rows.length; i++) if (rows[i].key !== null) last.set(pairKey(rows[i].kind, rows[i].key!), i)
      const pairs = new Map<string, readonly [string, string]>()
      for (const row of rows) {
        if (row.key !== null && row.onConflict === "replaceRunning") pairs.set(pairKey(row.kind, row.key), [row.kind, row.key])
      }
      if (pairs.size === 0) return
      const running = yield* store.itemFindRunning([...pairs.values()])
      const targets = running.filter((r) => num(r.id) !== results[last.get(pairKey(r.kind, r.dedupe_key!))!]!.id)
      const outcomes = targets.length === 0 ? [] : yield* store.itemCancelMany(
        targets.map((r) => num(r.id)),
        cancelError(REPLACED_REASON)
      )
      const cancelled = new Set(outcomes.filter((o) => o.outcome !== "finished").map((o) => num(o.id)))
      const byPair = new Map<string, Array<number>>()
      for (const r of targets) {
        if (!cancelled.has(num(r.id))) continue
        const key = pairKey(r.kind, r.dedupe_key!)
        byPair.set(key, [...(byPair.get(key) ?? []), num(r.id)])
      }
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]
        const result = results[i]!
        if (row.key === null || row.onConflict !== "replaceRunning" || result._tag === "Deduplicated") continue
        const key = pairKey(row.kind, row.key)
        results[i] = { ...result, cancelled: last.get(key) === i ? (byPair.get(key) ?? []).sort((a, b) => a - b) : [] }
      }
      const wasRunning = outcomes.filter((o) => o.outcome === "cancelledRunning").map((o) => num(o.id))
      if (wasRunning.length > 0) yield* wakeups.cancelled(wasRunning)
    })

  // This process's worker pools are woken at once (others by NOTIFY).
  const announce = (results: ReadonlyArray<EnqueueResult>) =>
    results.some((r) => r._tag !== "Deduplicated") ? wakeups.enqueued : Effect.void
  // Rows without a key cannot be skipped: one insert, its rows matched to the
  // input in order, no dedupe rounds (for a single enqueue the rounds' own
  // machinery cost more CPU than the rest of Docket's work in it).
  const insertUnkeyed = (
    rows: ReadonlyArray<InsertRow>,
    traceContext: string | null
  ): Effect.Effect<ReadonlyArray<EnqueueResult>, SqlError> =>
    Effect.map(store.itemInsertMany(rows, traceContext), (inserted) => {
      const results: Array<EnqueueResult | undefined> = new Array(rows.length)
      matchInserted(rows, rows.length === 1 ? [0] : rows.map((_, i) => i), inserted, results)
      return results as ReadonlyArray<EnqueueResult>
    })

  return (rows: ReadonlyArray<InsertRow>, traceContext: string | null): Effect.Effect<ReadonlyArray<EnqueueResult>, StorageError> =>
    rows.length === 0
      ? Effect.succeed([])
      : (rows.some((r) => r.key !== null)
        ? store.atomic(insertAll(rows, traceContext))
        : insertUnkeyed(rows, traceContext)).pipe(
        Effect.mapError(storage("enqueue")),
        Effect.tap(announce)
      )
}

const pairKey = (kind: string, key: string) => `${kind}\u0000${key}`

/** The error a "replaceRunning" enqueue gives the running items it cancels. */
export const REPLACED_REASON = "replaced by a new enqueue of its key"

// A keyed row that changes a waiting item of its key rather than leave it.
const replacing = (row: InsertRow) => row.key !== null && row.onConflict !== "keep"

// The pending rows a round takes (`now`) and leaves (`later`), both in input
// order. Of each key it takes the rows up to (not including) its second
// replacing row: one statement replaces a waiting item once (an UPDATE that
// joins two rows to one item takes either), so a key's replacements run
// one per round, in input order, and the last one's payload is the one left.
const splitRound = (rows: ReadonlyArray<InsertRow>, pending: ReadonlyArray<number>) => {
  const now: Array<number> = []
  const later: Array<number> = []
  const replacers = new Set<string>()
  const deferred = new Set<string>()
  for (const i of pending) {
    const row = rows[i]
    if (row.key === null) {
      now.push(i)
      continue
    }
    const key = pairKey(row.kind, row.key)
    if (deferred.has(key) || (replacing(row) && replacers.has(key))) {
      deferred.add(key)
      later.push(i)
      continue
    }
    if (replacing(row)) replacers.add(key)
    now.push(i)
  }
  return { now, later }
}

// Walks the input in order beside the inserted rows (ascending ids follow
// input order), recording each inserted row's id; returns the indexes of rows
// that were skipped (their key was held).
const matchInserted = (
  rows: ReadonlyArray<InsertRow>,
  pending: ReadonlyArray<number>,
  inserted: ReadonlyArray<KeyRow>,
  results: Array<EnqueueResult | undefined>
): Array<number> => {
  const skipped: Array<number> = []
  let next = 0
  for (const i of pending) {
    const row = rows[i]
    const candidate = inserted[next]
    if (candidate !== undefined && candidate.kind === row.kind && (candidate.dedupe_key ?? null) === row.key) {
      results[i] = { _tag: "Enqueued", id: num(candidate.id) }
      next++
    } else if (row.key === null) {
      throw new Error(`enqueue: inserted rows do not follow input order at item ${i}`)
    } else {
      skipped.push(i)
    }
  }
  if (next !== inserted.length) throw new Error("enqueue: more rows inserted than matched")
  return skipped
}
