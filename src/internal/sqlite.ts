/**
 * The SQLite dialect: binds the statements of internal/sql/ (each file's
 * `sqlite` texts) to a `SqlClient`. Batches travel as one JSON array parameter
 * expanded with `json_each`, so one prepared statement serves any batch size;
 * this module encodes them, rewrites the numbered parameters for the driver,
 * and runs the statements (claims unsynced, below). SQLite has one writer at a
 * time: every multi-statement operation starts with a write, so its
 * transaction holds the write lock from its first statement (a deferred
 * transaction that reads first could fail to upgrade).
 */
import { type SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import type { Dialect } from "./dialect.js"
import type { CancelRow, ClaimRow, FencedRow, FencedStateRow, IdRow, ItemRow, KeyRow, StatsRow } from "./rows.js"
import * as Cancel from "./sql/cancel.js"
import * as Claim from "./sql/claim.js"
import * as Complete from "./sql/complete.js"
import * as DeleteDead from "./sql/deleteDead.js"
import * as Extend from "./sql/extend.js"
import * as Fail from "./sql/fail.js"
import * as FindWaiting from "./sql/findWaiting.js"
import * as Get from "./sql/get.js"
import * as Insert from "./sql/insert.js"
import * as ListDead from "./sql/listDead.js"
import * as NextDue from "./sql/nextDue.js"
import * as Release from "./sql/release.js"
import * as RetryDead from "./sql/retryDead.js"
import * as Stats from "./sql/stats.js"

const fencesJson = (fences: ReadonlyArray<{ readonly id: number; readonly token: number }>) =>
  JSON.stringify(fences.map((f) => [f.id, f.token]))

// better-sqlite3 binds numbered parameters (?1) by name, not by position: each
// statement is rewritten once to plain ? marks with the matching parameter list.
const compiled = new Map<string, { readonly text: string; readonly order: ReadonlyArray<number> }>()
const compile = (text: string) => {
  let entry = compiled.get(text)
  if (entry === undefined) {
    const order: Array<number> = []
    const rewritten = text.replace(/\?(\d+)/g, (_, n: string) => {
      order.push(Number(n) - 1)
      return "?"
    })
    entry = { text: rewritten, order }
    compiled.set(text, entry)
  }
  return entry
}

// A claim commits without waiting for the disk: `synchronous = NORMAL` for
// its one statement, on the connection held exclusively meanwhile, then the
// configured level (FULL by default) again, whatever the claim's exit. In WAL
// mode a NORMAL commit survives a crash of any process; only an operating
// system crash or power loss can undo it, and that also ends every process
// that could hold the claim (a SQLite file's processes share one machine: it
// must be on a local disk), so no stale holder is left to present the claim's
// token, which a claim after the restart may issue again. The item is then
// waiting or leased as before the claim (that attempt is not counted).
// Enqueues, outcomes, renewals and dead-item changes keep the configured
// level. Not done outside WAL mode (a rollback journal at NORMAL can lose more
// than the last commit), when the configured level is NORMAL or lower already,
// or inside the caller's transaction (the claim commits with it).
// Measured here: a FULL commit 0.6-0.8 ms (p50, the event loop blocked
// meanwhile), a NORMAL one 0.02-0.13 ms.
const unsyncedClaims = (sql: SqlClient) => {
  // Read on the first claim: the level to restore, or null to claim as configured.
  let restoreTo: number | null | undefined
  const levelOf = (connection: Connection) =>
    restoreTo !== undefined ? Effect.succeed(restoreTo) : Effect.map(
      Effect.zip(
        connection.execute("PRAGMA synchronous", [], undefined),
        connection.execute("PRAGMA journal_mode", [], undefined)
      ),
      ([sync, journal]) => {
        const level = Number((sync[0] as { synchronous?: unknown } | undefined)?.synchronous)
        const wal = String((journal[0] as { journal_mode?: unknown } | undefined)?.journal_mode).toLowerCase() === "wal"
        restoreTo = wal && Number.isInteger(level) && level > 1 ? level : null
        return restoreTo
      }
    )
  return (text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
    Effect.scoped(Effect.flatMap(sql.reserve, (connection) =>
      Effect.flatMap(levelOf(connection), (level) => {
        const claim = connection.execute(text, params, undefined) as Effect.Effect<ReadonlyArray<ClaimRow>, SqlError>
        if (level === null) return claim
        // Uninterruptible, so the level is always set back (the statements are
        // synchronous and local; setting it back is retried, and a failure to
        // is returned, as the claim's own failure is, after it).
        const restore = Effect.retry(connection.execute(`PRAGMA synchronous = ${level}`, [], undefined), { times: 2 })
        return Effect.uninterruptible(
          connection.execute("PRAGMA synchronous = NORMAL", [], undefined).pipe(
            Effect.zipRight(Effect.exit(claim)),
            Effect.flatMap((exit) => Effect.zipRight(restore, exit))
          )
        )
      })))
}

/** The SQLite dialect over `sql`. */
export const make = (sql: SqlClient): Dialect => {
  const claimUnsynced = unsyncedClaims(sql)
  const compiled = (text: string, params: ReadonlyArray<unknown>) => {
    const { order, text: rewritten } = compile(text)
    return { text: rewritten, params: order.map((i) => params[i]) }
  }
  const run = <A extends object>(text: string, params: ReadonlyArray<unknown>) => {
    const c = compiled(text, params)
    return sql.unsafe<A>(c.text, c.params)
  }
  const both = <A>(first: Effect.Effect<ReadonlyArray<A>, SqlError>, second: Effect.Effect<ReadonlyArray<A>, SqlError>) =>
    sql.withTransaction(Effect.zipWith(first, second, (a, b) => [...a, ...b]))
  return {
    name: "sqlite",
    insert: (rows, traceContext) =>
      run<KeyRow>(Insert.sqlite, [
        JSON.stringify(rows.map((r) => [r.kind, r.payload, r.key, r.priority, r.runAt, r.delayMs, r.maxAttempts])),
        traceContext
      ]).pipe(Effect.map((inserted) => [...inserted].sort((a, b) => Number(a.id) - Number(b.id)))),
    findWaiting: (pairs) => run<KeyRow>(FindWaiting.sqlite, [JSON.stringify(pairs)]),
    claim: (worker, limit, leaseMs, kinds) => {
      const params = [worker, limit, leaseMs, kinds === null ? null : JSON.stringify(kinds)]
      // In the caller's transaction the claim commits with it.
      return Effect.flatMap(Effect.serviceOption(TransactionConnection), (tx) => {
        if (Option.isSome(tx)) return run<ClaimRow>(Claim.sqlite, params)
        const c = compiled(Claim.sqlite, params)
        return claimUnsynced(c.text, c.params)
      })
    },
    complete: (fences) => run<FencedRow>(Complete.sqlite, [fencesJson(fences)]),
    fail: (rows) => {
      const json = JSON.stringify(rows.map((r) => [r.id, r.token, r.error, r.delayMs, r.cancel ? 1 : 0]))
      return both(run<FencedStateRow>(Fail.sqliteAbsorb, [json]), run<FencedStateRow>(Fail.sqliteUpdate, [json]))
    },
    release: (fences) => {
      const json = fencesJson(fences)
      return both(run<FencedStateRow>(Release.sqliteAbsorb, [json]), run<FencedStateRow>(Release.sqliteUpdate, [json]))
    },
    extend: (fences, leaseMs) => run<FencedRow>(Extend.sqlite, [fencesJson(fences), leaseMs]),
    cancel: (ids, error) => {
      const json = JSON.stringify(ids)
      return sql.withTransaction(Effect.gen(function*() {
        const changed = [
          ...yield* run<CancelRow>(Cancel.sqliteRunning, [json, error]),
          ...yield* run<CancelRow>(Cancel.sqliteWaiting, [json, error])
        ]
        const existing = yield* run<IdRow>(Cancel.sqliteExisting, [json])
        const byId = new Map(changed.map((r) => [Number(r.id), r.outcome]))
        return existing.map((r): CancelRow => ({ id: r.id, outcome: byId.get(Number(r.id)) ?? "finished" }))
      }))
    },
    stats: run<StatsRow>(Stats.sqlite, []),
    get: (id) => run<ItemRow>(Get.sqlite, [id]),
    listDead: (kind, afterId, limit) => run<ItemRow>(ListDead.sqlite, [kind, afterId, limit]),
    retryDead: (selection) =>
      run<IdRow>(RetryDead.sqlite, [selection.ids === null ? null : JSON.stringify(selection.ids), selection.kind]),
    deleteDead: (selection) =>
      run<IdRow>(DeleteDead.sqlite, [selection.ids === null ? null : JSON.stringify(selection.ids), selection.kind]),
    nextDue: run<{ wait_ms: number | string | null }>(NextDue.sqlite, []),
    isUniqueViolation: (error: SqlError) => {
      const cause = error.cause
      return typeof cause === "object" && cause !== null && "code" in cause &&
        (cause.code === "SQLITE_CONSTRAINT_UNIQUE" || cause.code === "SQLITE_CONSTRAINT_PRIMARYKEY")
    },
    atomic: (effect) => sql.withTransaction(effect)
  }
}
