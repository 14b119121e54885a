/**
 * The PostgreSQL dialect: binds the statements of internal/sql/ (each file's
 * `pg` text) to a `SqlClient`. Batches travel as parallel arrays expanded with
 * `unnest`, so one statement text serves any batch size; this module encodes
 * them, and runs the statements: through the direct pool when Docket built
 * the client (internal/directPool.ts), claims on a reserved connection.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit, Scope } from "effect"
import * as Bindings from "./bindings.js"
import * as DirectPool from "./directPool.js"
import type { Dialect, InsertRow } from "./dialect.js"
import type {
  CancelRow, ClaimRow, FencedRow, FencedStateRow, IdRow, ItemRow, KeyRow, KindRow, StatsRow, TotalRow
} from "./rows.js"
import * as Cancel from "./sql/cancel.js"
import * as Claim from "./sql/claim.js"
import * as Complete from "./sql/complete.js"
import * as DeleteDead from "./sql/deleteDead.js"
import * as Extend from "./sql/extend.js"
import * as Fail from "./sql/fail.js"
import * as FindWaiting from "./sql/findWaiting.js"
import * as Get from "./sql/get.js"
import * as Insert from "./sql/insert.js"
import * as KindLimits from "./kindLimits.js"
import * as Transaction from "./transaction.js"
import * as Kinds from "./sql/kinds.js"
import * as List from "./sql/list.js"
import * as ListDead from "./sql/listDead.js"
import * as NextDue from "./sql/nextDue.js"
import * as Counts from "./sql/counts.js"
import * as Prune from "./sql/prune.js"
import * as Release from "./sql/release.js"
import * as RetryDead from "./sql/retryDead.js"
import * as Schedules from "./sql/schedules.js"
import * as Snooze from "./sql/snooze.js"
import * as Stats from "./sql/stats.js"
import * as Workers from "./sql/workers.js"

// Complete: deletes, or keeps the rows as done with their results.
const completeWith = (run: Bindings.Run): Dialect["complete"] => (rows, keep) => {
  const ids = intArray(rows.map((f) => f.id))
  const tokens = intArray(rows.map((f) => f.token))
  if (!keep) return run<FencedRow>(Complete.pgDelete, [ids, tokens])
  // No results in the batch (the common case): a NULL array, padded by
  // unnest, instead of an array of NULLs for the driver to encode.
  const results = rows.some((r) => r.result !== null) ? rows.map((r) => r.result) : null
  return run<FencedRow>(Complete.pgKeep, [ids, tokens, results])
}

/**
 * Cancel, then the ids it returned no row for read again in a new snapshot:
 * one completed while the cancel waited for its lock is in docket_done, and
 * finished (sql/cancel.ts, pgExisting).
 */
const cancelWith = (run: Bindings.Run): Dialect["cancel"] => (ids, error) =>
  Effect.flatMap(run<CancelRow>(Cancel.pg, [intArray(ids), error]), (rows) => {
    const answered = new Set(rows.map((r) => Number(r.id)))
    const missing = ids.filter((id) => !answered.has(id))
    if (missing.length === 0) return Effect.succeed(rows)
    return Effect.map(
      run<IdRow>(Cancel.pgExisting, [intArray(missing)]),
      (found) => [...rows, ...found.map((f): CancelRow => ({ id: f.id, outcome: "finished" }))]
    )
  })

/**
 * The PostgreSQL dialect. Given a scope, claims run on one connection reserved
 * from the pool on the first claim (and again after a connection error), held
 * until the scope closes: a worker woken from idle claims without the pool's
 * check-out, which cost 0.5-0.6 ms of the pickup after idle (1.95-2.12 ms per
 * claim round trip through the pool, 1.45 ms on a reserved connection).
 */
export const make = (sql: SqlClient, claimScope?: Scope.Scope, pool?: DirectPool.Service): Dialect => {
  const run = pool === undefined || pool.client !== sql
    ? <A extends object>(text: string, params: ReadonlyArray<unknown>) => sql.unsafe<A>(text, params)
    : DirectPool.runner(sql, pool)
  const pooled = (params: ReadonlyArray<unknown>) => run<ClaimRow>(Claim.pg, params)
  const claim = claimScope === undefined ? pooled : reservedClaims(sql, claimScope, pooled)
  return {
    name: "pg",
    run,
    insert: (rows, traceContext) => {
      if (rows.length === 1) {
        const r = rows[0]
        return run<KeyRow>(Insert.pgOne, [r.kind, r.payload, r.key, r.priority, r.runAt, r.delayMs, r.maxAttempts, traceContext])
      }
      const keyed = rows.some((r) => r.key !== null)
      const params = batchParams(rows, keyed, traceContext)
      if (keyed) return run<KeyRow>(Insert.pgKeyed, params)
      return run<{ ids: string | null }>(Insert.pgPlain, params).pipe(Effect.map((result) => idsAsRows(rows, result[0].ids)))
    },
    findWaiting: (pairs) => run<KeyRow>(FindWaiting.pg, [pairs.map((p) => p[0]), pairs.map((p) => p[1])]),
    claim: (worker, limit, leaseMs, kinds, limitedMax) => claim([worker, limit, leaseMs, kinds, limitedMax]),
    complete: completeWith(run),
    fail: (rows) =>
      run<FencedStateRow>(Fail.pg, [
        intArray(rows.map((r) => r.id)),
        intArray(rows.map((r) => r.token)),
        rows.map((r) => r.error),
        intArray(rows.map((r) => r.delayMs)),
        `{${rows.map((r) => (r.cancel ? "t" : "f")).join(",")}}`
      ]),
    release: (fences) => run<FencedStateRow>(Release.pg, [intArray(fences.map((f) => f.id)), intArray(fences.map((f) => f.token))]),
    snooze: (rows) =>
      run<FencedStateRow>(Snooze.pg, [
        intArray(rows.map((r) => r.id)),
        intArray(rows.map((r) => r.token)),
        intArray(rows.map((r) => r.delayMs))
      ]),
    extend: (fences, leaseMs) =>
      run<FencedRow>(Extend.pg, [intArray(fences.map((f) => f.id)), intArray(fences.map((f) => f.token)), leaseMs]),
    cancel: cancelWith(run),
    stats: run<StatsRow>(Stats.pg, []),
    get: (id) => run<ItemRow>(Get.pg, [id]),
    getMany: (ids) => run<ItemRow>(Get.pgMany, [intArray(ids)]),
    listDead: (kind, afterId, limit) => run<ItemRow>(ListDead.pg, [kind, afterId, limit]),
    retryDead: (selection) => run<IdRow>(RetryDead.pg, [selection.ids, selection.kind]),
    list: (q) =>
      q.by === "finished"
        ? run<ItemRow>(List.pg.finished, [q.state, q.kind, q.finishedBefore, q.idBefore, q.limit])
        : run<ItemRow>(List.pg[q.by], [q.kind, q.idBefore, q.limit]),
    prune: (state, retentionMs, limit) =>
      (state === "done"
        ? run<{ n: number | string }>(Prune.pgDone, [retentionMs, limit])
        : run<{ n: number | string }>(Prune.pg, [state, retentionMs, limit])
      ).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))),
    pruneMinuteCounts: (keptMs, limit) =>
      run<{ n: number | string }>(Prune.pgMinuteCounts, [keptMs, limit]).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))),
    deleteDead: (selection) => run<IdRow>(DeleteDead.pg, [selection.ids, selection.kind]),
    totals: run<TotalRow>(Counts.pgTotals, []),
    nextDue: run<{ wait_ms: number | string | null }>(NextDue.pg, []),
    listKinds: run<KindRow>(Kinds.pgList, []),
    setPaused: (kind, paused) => run<{ kind: string }>(Kinds.pgSetPaused, [kind, paused]),
    setLimits: KindLimits.setter({
      reset: Kinds.pgReset,
      setByPerson: Kinds.pgSetLimits,
      declare: Kinds.pgDeclare,
      dropSlots: Kinds.pgDropSlots,
      addSlots: Kinds.pgAddSlots
    }, (b) => b, run, Transaction.typed(sql)),
    ...Bindings.workers(run, {
      heartbeat: Workers.pgHeartbeat, remove: Workers.pgRemove, prune: Workers.pgPrune, list: Workers.pgList
    }),
    ...Bindings.schedules(run, {
      read: Schedules.pgRead,
      insert: Schedules.pgInsert,
      advance: Schedules.pgAdvance,
      redeclare: Schedules.pgRedeclare,
      lastItem: Schedules.pgLastItem,
      touch: Schedules.pgTouch
    }, (list: ReadonlyArray<string>) => list),
    // A COMMIT lost with its connection fails typed, not as a defect (transaction.ts).
    transaction: Transaction.typed(sql),
    isUniqueViolation: (error: SqlError) => pgCode(error.cause) === "23505",
    atomic: (effect) => effect
  }
}

// Claims on a reserved connection, one at a time (a connection runs one
// statement at a time; claims are short). The reservation is dropped after a
// failed claim, so a broken connection (a database restart) is replaced by the
// next claim, and released when the scope closes, before the pool ends (a
// claim after that goes through the pool).
const reservedClaims = (
  sql: SqlClient,
  scope: Scope.Scope,
  pooled: (params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<ClaimRow>, SqlError>
) => {
  let held: { readonly connection: Connection; readonly scope: Scope.CloseableScope } | undefined
  let closed = false
  const lock = Effect.unsafeMakeSemaphore(1)
  const drop = Effect.suspend(() => {
    const current = held
    held = undefined
    return current === undefined ? Effect.void : Scope.close(current.scope, Exit.void)
  })
  const reserve = Effect.gen(function*() {
    const reservation = yield* Scope.make()
    const connection = yield* Scope.extend(sql.reserve, reservation).pipe(
      Effect.onError(() => Scope.close(reservation, Exit.void))
    )
    held = { connection, scope: reservation }
    return connection
  })
  Effect.runSync(Scope.addFinalizer(scope, lock.withPermits(1)(Effect.suspend(() => {
    closed = true
    return drop
  }))))
  return (params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
    lock.withPermits(1)(Effect.suspend(() => {
      if (closed) return pooled(params)
      return Effect.flatMap(held === undefined ? reserve : Effect.succeed(held.connection), (connection) =>
        connection.execute(Claim.pg, params, undefined) as Effect.Effect<ReadonlyArray<ClaimRow>, SqlError>).pipe(
        Effect.tapErrorCause(() => drop)
      )
    }))
}

// The parameters of a batch insert (sql/insert.ts): payloads as one JSON array, each other column
// as an array, or as a NULL array and a scalar when the batch shares its value;
// the span context, one for the batch.
const batchParams = (rows: ReadonlyArray<InsertRow>, keyed: boolean, traceContext: string | null): Array<unknown> => {
  let payloads = "["
  for (let i = 0; i < rows.length; i++) payloads += (i === 0 ? "" : ",") + rows[i].payload
  payloads += "]"
  const column = <A extends string | number | null>(get: (row: InsertRow) => A, encode: (values: Array<A>) => unknown) => {
    const first = get(rows[0])
    let uniform = true
    for (let i = 1; i < rows.length && uniform; i++) uniform = get(rows[i]) === first
    return uniform ? [null, first] : [encode(rows.map(get)), null]
  }
  const [kinds, kind] = column((r) => r.kind, (values) => values)
  const [priorities, priority] = column((r) => r.priority, intArray)
  const [runAts, runAt] = column((r) => r.runAt, intArray)
  const [delays, delay] = column((r) => r.delayMs, intArray)
  const [maxAttempts, maxAttempt] = column((r) => r.maxAttempts, intArray)
  const keys = keyed ? rows.map((r) => r.key) : null
  return [kinds, payloads, keys, priorities, runAts, delays, maxAttempts, kind, priority, runAt, delay, maxAttempt, traceContext]
}

// An unkeyed batch inserts every row, in input order: its ids (one array,
// ascending) pair with the rows by position.
// (array_agg of no rows is NULL: never here, as every row is inserted or the
// statement fails, but the count check below says so instead of a TypeError.)
const idsAsRows = (rows: ReadonlyArray<InsertRow>, ids: string | null): Array<KeyRow> => {
  const list = ids === null || ids.length <= 2 ? [] : ids.slice(1, -1).split(",")
  if (list.length !== rows.length) throw new Error(`enqueue: ${list.length} ids for ${rows.length} rows`)
  return list.map((id, i) => ({ id: Number(id), kind: rows[i].kind, dedupe_key: null }))
}

/**
 * An array of integers (or nulls) as a PostgreSQL array literal. The driver's
 * own array encoding quotes and escapes every element, which cost 5% of a
 * drain's allocations; these values are checked integers, so a join is exact.
 */
export const intArray = (values: ReadonlyArray<number | null>): string => {
  let text = "{"
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (v !== null && !Number.isSafeInteger(v)) throw new Error(`intArray: ${v} is not an integer`)
    text += (i === 0 ? "" : ",") + (v === null ? "NULL" : String(v))
  }
  return text + "}"
}

const pgCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined
