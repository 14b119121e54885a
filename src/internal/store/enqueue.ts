/**
 * Enqueue: the dedupe insert protocol. A keyed row whose key a waiting item
 * holds is not inserted; its result is that item (Deduplicated). Rows without
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
import { storage } from "./decode.js"
import type { Prepare } from "./prepare.js"

/** The operations an enqueue runs. */
type Insert = Pick<Storage, "itemInsertMany" | "itemFindWaiting" | "atomic">

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
  // Inserts, then looks up the waiting item for each keyed row that was skipped.
  // If that item was claimed in between (so nothing waits any more), the row is
  // inserted again: every result is either a new item or one that waited.
  const insertAll = (
    rows: ReadonlyArray<InsertRow>,
    traceContext: string | null
  ): Effect.Effect<ReadonlyArray<EnqueueResult>, SqlError> =>
    Effect.gen(function*() {
      const results: Array<EnqueueResult | undefined> = new Array(rows.length)
      let pending = rows.map((_, i) => i)
      for (let round = 0; pending.length > 0; round++) {
        if (round === 5) {
          return yield* Effect.die(new Error("enqueue: a keyed item kept changing state while enqueuing"))
        }
        const inserted = yield* store.itemInsertMany(pending.map((i) => rows[i]), traceContext)
        const skipped = matchInserted(rows, pending, inserted, results)
        if (skipped.length === 0) break
        const pairs = skipped.map((i) => [rows[i].kind, rows[i].key!] as const)
        const waiting = yield* store.itemFindWaiting(pairs)
        const byPair = new Map(waiting.map((w) => [pairKey(w.kind, w.dedupe_key!), num(w.id)]))
        pending = []
        for (const i of skipped) {
          const id = byPair.get(pairKey(rows[i].kind, rows[i].key!))
          if (id === undefined) pending.push(i)
          else results[i] = { _tag: "Deduplicated", id }
        }
      }
      return results as ReadonlyArray<EnqueueResult>
    })

  // This process's worker pools are woken at once (others by NOTIFY).
  const announce = (results: ReadonlyArray<EnqueueResult>) =>
    results.some((r) => r._tag === "Enqueued") ? wakeups.enqueued : Effect.void

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
