/**
 * The SQLite dialect: binds the statements of internal/sql/ (each file's
 * `sqlite` texts) to a `SqlClient`. Batches travel as one JSON array parameter
 * expanded with `json_each`, so one prepared statement serves any batch size;
 * this module encodes them, rewrites the numbered parameters for the driver,
 * and runs the statements (claims: internal/sqliteClaim.ts). SQLite has one writer at a
 * time: every multi-statement operation starts with a write, so its
 * transaction holds the write lock from its first statement (a deferred
 * transaction that reads first could fail to upgrade).
 */
import { type SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import * as Bindings from "./bindings.js"
import type { DeadSelection, Dialect } from "./dialect.js"
import * as SqliteClaim from "./sqliteClaim.js"
import * as Transaction from "./transaction.js"
import type { CancelRow, FencedRow, FencedStateRow, IdRow, ItemRow, KeyRow, KindRow, StatsRow, TotalRow } from "./rows.js"
import * as Cancel from "./sql/cancel.js"
import * as Complete from "./sql/complete.js"
import * as DeleteDead from "./sql/deleteDead.js"
import * as Extend from "./sql/extend.js"
import * as Fail from "./sql/fail.js"
import * as FindWaiting from "./sql/findWaiting.js"
import * as Get from "./sql/get.js"
import * as Insert from "./sql/insert.js"
import * as KindLimits from "./kindLimits.js"
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

const fencesJson = (fences: ReadonlyArray<{ readonly id: number; readonly token: number }>) =>
  JSON.stringify(fences.map((f) => [f.id, f.token]))

// better-sqlite3 binds numbered parameters (?1) by name, not by position: each
// statement is rewritten once to plain ? marks with the matching parameter list.
const cache = new Map<string, { readonly text: string; readonly order: ReadonlyArray<number> }>()
const compile = (text: string) => {
  let entry = cache.get(text)
  if (entry === undefined) {
    const order: Array<number> = []
    const rewritten = text.replace(/\?(\d+)/g, (_, n: string) => {
      order.push(Number(n) - 1)
      return "?"
    })
    entry = { text: rewritten, order }
    cache.set(text, entry)
  }
  return entry
}

// A statement's text and parameters as the driver takes them.
const compiled = (text: string, params: ReadonlyArray<unknown>) => {
  const { order, text: rewritten } = compile(text)
  return { text: rewritten, params: order.map((i) => params[i]) }
}

// Cancel in one transaction: the running ones (their holders are told by
// their next renewal), then the waiting ones, then every id's outcome.
const cancelWith = (sql: SqlClient, run: Bindings.Run): Dialect["cancel"] => (ids, error) => {
  const json = JSON.stringify(ids)
  return Transaction.typed(sql)(Effect.gen(function*() {
    const changed = [
      ...yield* run<CancelRow>(Cancel.sqliteRunning, [json, error]),
      ...yield* run<CancelRow>(Cancel.sqliteWaiting, [json, error])
    ]
    const existing = yield* run<IdRow>(Cancel.sqliteExisting, [json])
    const byId = new Map(changed.map((r) => [Number(r.id), r.outcome]))
    return existing.map((r): CancelRow => ({ id: r.id, outcome: byId.get(Number(r.id)) ?? "finished" }))
  }))
}

// Fail in one transaction: absorb, update, then count the rows they sent
// back to waiting (their kinds came back with them) in the minute's counts.
const failWith = (run: Bindings.Run, transaction: Dialect["transaction"]): Dialect["fail"] => (rows) => {
  const json = JSON.stringify(rows.map((r) => [r.id, r.token, r.error, r.delayMs, r.cancel ? 1 : 0]))
  type Row = FencedStateRow & { readonly kind: string }
  return transaction(Effect.gen(function*() {
    const changed = [...yield* run<Row>(Fail.sqliteAbsorb, [json]), ...yield* run<Row>(Fail.sqliteUpdate, [json])]
    const retried = changed.filter((r) => r.outcome === "waiting" || r.outcome === "absorbed").map((r) => r.kind)
    if (retried.length > 0) yield* run(Fail.sqliteCountRetries, [JSON.stringify(retried)])
    return changed.map((r): FencedStateRow => ({ id: r.id, lease_seq: r.lease_seq, outcome: r.outcome }))
  }))
}

/**
 * A statement that takes finished items (or retry counts) out of the store,
 * and the count of what it took added to docket_counts (sql/counts.ts), in one
 * transaction: a reader of the totals sees both or neither.
 */
const counting = <A extends { readonly kind: string }>(
  run: Bindings.Run,
  transaction: Dialect["transaction"],
  take: Effect.Effect<ReadonlyArray<A>, SqlError>,
  what: string,
  n: (row: A) => number = () => 1
): Effect.Effect<ReadonlyArray<A>, SqlError> =>
  transaction(Effect.gen(function*() {
    const rows = yield* take
    if (rows.length > 0) {
      const counts = rows.map((r) => [r.kind, what, n(r)])
      yield* run(Counts.sqliteAdd, [JSON.stringify(counts)])
    }
    return rows
  }))

/**
 * The statements that take finished items (or retry counts) out of the store,
 * each with its count added to docket_counts in the same transaction.
 */
const countedRemovals = (
  run: Bindings.Run,
  transaction: Dialect["transaction"]
): Pick<Dialect, "prune" | "pruneMinuteCounts" | "retryDead" | "deleteDead"> => {
  const dead = (text: string) => (selection: DeadSelection) =>
    counting(run, transaction, run<IdRow & { kind: string }>(text, [selection.ids === null ? null : JSON.stringify(selection.ids), selection.kind]), "dead")
  return {
    prune: (state, retentionMs, limit) =>
      counting(run, transaction, run<{ kind: string }>(Prune.sqlite, [state, retentionMs, limit]), state)
        .pipe(Effect.map((rows) => rows.length)),
    pruneMinuteCounts: (keptMs, limit) =>
      counting(
        run,
        transaction,
        run<{ kind: string; retried: number }>(Prune.sqliteMinuteCounts, [keptMs, limit]),
        "retried",
        (r) => Number(r.retried)
      ).pipe(Effect.map((rows) => rows.length)),
    retryDead: dead(RetryDead.sqlite),
    deleteDead: dead(DeleteDead.sqlite)
  }
}

/** The SQLite dialect over `sql`. */
export const make = (sql: SqlClient): Dialect => {
  const transaction = Transaction.typed(sql)
  const claimUnsynced = SqliteClaim.unsynced(sql, compiled)
  const run = <A extends object>(text: string, params: ReadonlyArray<unknown>) => {
    const c = compiled(text, params)
    return sql.unsafe<A>(c.text, c.params)
  }
  const both = <A>(first: Effect.Effect<ReadonlyArray<A>, SqlError>, second: Effect.Effect<ReadonlyArray<A>, SqlError>) =>
    transaction(Effect.zipWith(first, second, (a, b) => [...a, ...b]))
  return {
    name: "sqlite",
    run,
    insert: (rows, traceContext) =>
      run<KeyRow>(Insert.sqlite, [
        JSON.stringify(rows.map((r) => [r.kind, r.payload, r.key, r.priority, r.runAt, r.delayMs, r.maxAttempts])),
        traceContext
      ]).pipe(Effect.map((inserted) => [...inserted].sort((a, b) => Number(a.id) - Number(b.id)))),
    findWaiting: (pairs) => run<KeyRow>(FindWaiting.sqlite, [JSON.stringify(pairs)]),
    claim: (worker, limit, leaseMs, kinds, limitedMax) => {
      const request = { worker, limit, leaseMs, kindsJson: kinds === null ? null : JSON.stringify(kinds), limitedMax }
      // In the caller's transaction the claim commits with it.
      return Effect.flatMap(Effect.serviceOption(TransactionConnection), (tx) =>
        Option.isSome(tx) ? SqliteClaim.inTransaction(run, request) : claimUnsynced(request))
    },
    complete: (rows, keep) =>
      keep
        ? run<FencedRow>(Complete.sqliteKeep, [JSON.stringify(rows.map((r) => [r.id, r.token, r.result]))])
        : run<FencedRow>(Complete.sqliteDelete, [fencesJson(rows)]),
    fail: failWith(run, transaction),
    release: (fences) => {
      const json = fencesJson(fences)
      return both(run<FencedStateRow>(Release.sqliteAbsorb, [json]), run<FencedStateRow>(Release.sqliteUpdate, [json]))
    },
    snooze: (rows) => {
      const json = JSON.stringify(rows.map((r) => [r.id, r.token, r.delayMs]))
      return both(run<FencedStateRow>(Snooze.sqliteAbsorb, [json]), run<FencedStateRow>(Snooze.sqliteUpdate, [json]))
    },
    extend: (fences, leaseMs) => run<FencedRow>(Extend.sqlite, [fencesJson(fences), leaseMs]),
    cancel: cancelWith(sql, run),
    stats: run<StatsRow>(Stats.sqlite, []),
    get: (id) => run<ItemRow>(Get.sqlite, [id]),
    getMany: (ids) => run<ItemRow>(Get.sqliteMany, [JSON.stringify(ids)]),
    listDead: (kind, afterId, limit) => run<ItemRow>(ListDead.sqlite, [kind, afterId, limit]),
    list: (q) =>
      q.by === "finished"
        ? run<ItemRow>(List.sqlite.finished, [q.state, q.kind, q.finishedBefore, q.idBefore, q.limit])
        : run<ItemRow>(List.sqlite[q.by], [q.kind, q.idBefore, q.limit]),
    ...countedRemovals(run, transaction),
    totals: run<TotalRow>(Counts.sqliteTotals, []),
    nextDue: run<{ wait_ms: number | string | null }>(NextDue.sqlite, []),
    listKinds: run<KindRow>(Kinds.sqliteList, []),
    setPaused: (kind, paused) => run<{ kind: string }>(Kinds.sqliteSetPaused, [kind, paused ? 1 : 0]),
    setLimits: KindLimits.setter({
      reset: Kinds.sqliteReset,
      setByPerson: Kinds.sqliteSetLimits,
      declare: Kinds.sqliteDeclare,
      dropSlots: Kinds.sqliteDropSlots,
      addSlots: Kinds.sqliteAddSlots
    }, (b) => (b ? 1 : 0), run, transaction),
    ...Bindings.workers(run, {
      heartbeat: Workers.sqliteHeartbeat, remove: Workers.sqliteRemove, prune: Workers.sqlitePrune, list: Workers.sqliteList
    }),
    ...Bindings.schedules(run, {
      read: Schedules.sqliteRead,
      insert: Schedules.sqliteInsert,
      advance: Schedules.sqliteAdvance,
      redeclare: Schedules.sqliteRedeclare,
      lastItem: Schedules.sqliteLastItem,
      touch: Schedules.sqliteTouch
    }, (list: ReadonlyArray<string>) => JSON.stringify(list)),
    transaction,
    isUniqueViolation: (error: SqlError) => {
      const cause = error.cause
      return typeof cause === "object" && cause !== null && "code" in cause &&
        (cause.code === "SQLITE_CONSTRAINT_UNIQUE" || cause.code === "SQLITE_CONSTRAINT_PRIMARYKEY")
    },
    atomic: transaction
  }
}
