/**
 * Claim: leasing up to a batch of due items to a worker. Due items come from
 * two sources, items whose lease ran out (their worker died) and waiting
 * items; the batch is the first of their union in claim order (priority,
 * run-after, id), and a waiting keyed item is not due while an item with its
 * kind and key holds a live lease (migrations/pg/0002_claim_function.sql says
 * why, in full).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { TransactionConnection } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Now from "./clock.js"
import { CLAIM_COLUMNS, claimText } from "./columns.js"
import { compiled, type Db, op } from "./db.js"
import { Cursors, type WalkedRow } from "./claimCursors.js"
import { claimGroups, type Exec } from "./claimGroups.js"
import { type ControlRow, limitedAmong, prefetchable, sqliteControls } from "./claimControls.js"
import type { ClaimRow } from "./rows.js"

/** A row of the PostgreSQL claim: an item and whether the cursors' walk claimed it, or (id NULL) the next bound. */
type PgClaimRow = ClaimRow & WalkedRow

/**
 * The operation: leases due items to `worker` for `leaseMs`; at most
 * `limitedMax` of them of limited kinds, none of paused kinds; of `kinds`
 * (null for every kind); with each item's stored trace context when
 * `traceContext` (else null: columns.ts, `untraced`).
 */
export type ClaimAcquire = (
  worker: string,
  limit: number,
  leaseMs: number,
  kinds: ReadonlyArray<string> | null,
  limitedMax: number,
  traceContext: boolean
) => Effect.Effect<ReadonlyArray<ClaimRow>, SqlError>

/**
 * PostgreSQL: a server-side function, docket_claim_next (0015_claim_cursor.sql:
 * docket_claim of 0006 and 0010 with the walk's cursors, see ./claimCursors.ts),
 * over docket_claim_from (the full walk of the claim index a priority at a
 * time, 0013_claim_skip_scan.sql) and docket_claim_after (the walk from the
 * cursors). Their live text is in migrations/pg/schema.sql (generated from the
 * migrations). Why a function at all (its plan, kept per session):
 * 0002_claim_function.sql. $1 worker, $2 limit, $3 lease in ms, $4 kinds or
 * NULL for all, $5 the most items of limited kinds, $6-$8 the cursors'
 * priorities, run_at and id, or NULL for a full walk, $9 the bound of the
 * expired leases to read (NULL: all). Each item says whether the cursors'
 * walk claimed it (`walked`); a last row without an item (id NULL) gives the
 * next bound (`expired_until`) and the index entries the claim read
 * (`entries_read`).
 */
export const pg = `SELECT ${CLAIM_COLUMNS}, walked, expired_until, entries_read FROM (
  SELECT (c.item).*, c.walked, c.expired_until, c.entries_read
  FROM docket_claim_next($1::text, $2::int, $3::bigint, $4::text[], $5::int, $6::int[], $7::bigint[], $8::bigint[], $9::bigint) c) x`

/**
 * SQLite: the same two sources in one UPDATE ... RETURNING: SQLite serialises
 * writers, so no two claimers can take one item. Only ungrouped items: the
 * grouped ones are the grouped claim's (./claimGroups.ts), and the claim
 * index holds only ungrouped ones (migrations/pg/0020_grouped_claim.sql says
 * why). ?1 worker, ?2 limit, ?3
 * lease in ms, ?4 a JSON array of kinds or NULL for all, ?5 1 to leave out the
 * controlled kinds (paused or limited: read by the statement itself, so a
 * kind paused or limited a moment ago is left out too), 0 to claim a limited
 * kind on its own (the SQLite claim, below).
 */
export const sqlite = `
WITH controlled AS (
  SELECT kind FROM docket_kinds
  WHERE paused OR concurrency IS NOT NULL OR rate_limit IS NOT NULL OR group_concurrency IS NOT NULL
    OR paused_groups > 0)
UPDATE docket_items
SET state = 'running', attempts = attempts + 1, lease_seq = lease_seq + 1, claimed_by = ?1,
    lease_until = ${Now.sqlite} + ?3, updated_at = ${Now.sqlite}
WHERE id IN (
  SELECT id FROM (
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'running' AND i.group_key IS NULL AND i.lease_until <= ${Now.sqlite}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
        AND (?5 = 0 OR i.kind NOT IN (SELECT kind FROM controlled))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
    UNION ALL
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'waiting' AND i.group_key IS NULL AND i.run_at <= ${Now.sqlite}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
        AND (?5 = 0 OR i.kind NOT IN (SELECT kind FROM controlled))
        AND (i.dedupe_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM docket_items r
          WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
            AND r.lease_until > ${Now.sqlite}))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
  ) ORDER BY priority DESC, run_at, id LIMIT ?2
)
RETURNING ${CLAIM_COLUMNS}`

/**
 * SQLite, after a rate-limited kind's claim in the same transaction: its ?2
 * oldest slots take this start's time (migrations/pg/0006_control.sql says
 * why that keeps the rate exact). ?1 kind, ?2 items claimed.
 */
export const sqliteTakeSlots = `
UPDATE docket_kind_slots SET started_at = ${Now.sqlite}
WHERE kind = ?1 AND slot IN (
  SELECT slot FROM docket_kind_slots WHERE kind = ?1 ORDER BY started_at, slot LIMIT ?2)`

/*
 * The SQLite claim: the statements above run so that paused and
 * limited kinds are obeyed exactly across every process on the file, and a
 * claim commits without waiting for the disk (below).
 *
 * With no limited kind among those claimed (the common case) a claim is two
 * statements: a read of the controls, and the claim itself, which leaves out
 * every controlled kind on its own (so a kind paused between the two is left
 * out all the same). With a limited kind, the claim is one transaction that
 * takes the write lock first (BEGIN IMMEDIATE: SQLite then serialises it with
 * every other writer, in every process), reads each limited kind's allowance
 * (its concurrency less the items holding a live lease, its free rate slots),
 * claims each up to it, writes its slots, and claims the other kinds with
 * what is left of the batch.
 */
/** What one claim asks for. */
interface ClaimRequest {
  readonly worker: string
  readonly limit: number
  readonly leaseMs: number
  /** A JSON array of kinds, or null for every kind. */
  readonly kindsJson: string | null
  /** The most items of limited kinds (the pool's free slots). */
  readonly limitedMax: number
  /** Read each item's stored trace context. */
  readonly traceContext: boolean
}


// One controlled kind's grouped claim (its groups, then its ungrouped items).
const groupsOf = (exec: Exec, r: ClaimRequest, c: ControlRow, limit: number) =>
  claimGroups(exec, {
    worker: r.worker,
    limit,
    leaseMs: r.leaseMs,
    traceContext: r.traceContext,
    kind: c.kind,
    concurrency: c.group_concurrency,
    ordered: c.group_ordered !== 0 && c.group_concurrency !== null
  })

// The limited kinds' claims and then the rest, inside the write lock.
const claimLimited = (exec: Exec, r: ClaimRequest): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
  Effect.gen(function*() {
    const controls = yield* exec<ControlRow>(sqliteControls, [r.kindsJson])
    const claimed: Array<ClaimRow> = []
    let limitedLeft = Math.min(r.limit, r.limitedMax)
    for (const c of controls) {
      if (c.paused || limitedLeft <= 0) continue
      const allowed = Math.min(limitedLeft, c.concurrency_left ?? limitedLeft, c.rate_left ?? limitedLeft)
      if (allowed <= 0) continue
      const rows = c.group_concurrency === null && c.paused_groups === 0 && c.grouped === 0
        ? yield* exec<ClaimRow>(claimText(sqlite, r.traceContext), [r.worker, allowed, r.leaseMs, JSON.stringify([c.kind]), 0])
        : yield* groupsOf(exec, r, c, allowed)
      if (rows.length > 0 && c.rate_limit !== null) yield* exec(sqliteTakeSlots, [c.kind, rows.length])
      limitedLeft -= rows.length
      claimed.push(...rows)
    }
    const remaining = r.limit - claimed.length
    if (remaining > 0) claimed.push(...(yield* exec<ClaimRow>(claimText(sqlite, r.traceContext), [r.worker, remaining, r.leaseMs, r.kindsJson, 1])))
    // What the general claim left goes to the grouped kinds that may be prefetched.
    for (const c of controls) {
      if (claimed.length >= r.limit) break
      if (prefetchable(c)) claimed.push(...(yield* groupsOf(exec, r, c, r.limit - claimed.length)))
    }
    return claimed
  })

/** A claim inside the caller's transaction (it commits with it). */
const inTransaction = (exec: Exec, r: ClaimRequest): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
  Effect.flatMap(exec<ControlRow>(sqliteControls, [r.kindsJson]), (controls) =>
    limitedAmong(controls)
      ? claimLimited(exec, r)
      : exec<ClaimRow>(claimText(sqlite, r.traceContext), [r.worker, r.limit, r.leaseMs, r.kindsJson, 1]))

// On a connection held alone: BEGIN IMMEDIATE ... COMMIT, rolled back on any
// failure or interruption (the steps are synchronous and local).
const immediate = (connection: Connection, exec: Exec, r: ClaimRequest) => {
  const raw = (text: string) => connection.execute(text, [], undefined)
  return Effect.uninterruptible(Effect.zipRight(
    raw("BEGIN IMMEDIATE"),
    Effect.flatMap(Effect.exit(claimLimited(exec, r)), (exit) =>
      Exit.isSuccess(exit) ? Effect.as(raw("COMMIT"), exit.value) : Effect.zipRight(Effect.ignore(raw("ROLLBACK")), exit))
  ))
}

// A claim commits without waiting for the disk: `synchronous = NORMAL` for
// its statements, on the connection held exclusively meanwhile, then the
// configured level (FULL by default) again, whatever the claim's exit. In WAL
// mode a NORMAL commit survives a crash of any process; only an operating
// system crash or power loss can undo it, and that also ends every process
// that could hold the claim (a SQLite file's processes share one machine: it
// must be on a local disk), so no stale holder is left to present the claim's
// token, which a claim after the restart may issue again. The item is then
// waiting or leased as before the claim (that attempt is not counted).
// Enqueues, outcomes, renewals and dead-item changes keep the configured
// level. Not done outside WAL mode (a rollback journal at NORMAL can lose more
// than the last commit), or when the configured level is NORMAL or lower
// already. Measured here: a FULL commit 0.6-0.8 ms (p50, the event loop
// blocked meanwhile), a NORMAL one 0.02-0.13 ms.
/** Claims outside a transaction, on a connection of `sql` reserved for each claim. */
const unsynced = (sql: SqlClient) => {
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
  return (r: ClaimRequest): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
    Effect.scoped(Effect.flatMap(sql.reserve, (connection) => {
      const exec: Exec = <A extends object>(text: string, params: ReadonlyArray<unknown>) => {
        const c = compiled(text, params)
        return connection.execute(c.text, c.params, undefined) as Effect.Effect<ReadonlyArray<A>, SqlError>
      }
      const claim = Effect.flatMap(exec<ControlRow>(sqliteControls, [r.kindsJson]), (controls) =>
        limitedAmong(controls)
          ? immediate(connection, exec, r)
          : exec<ClaimRow>(claimText(sqlite, r.traceContext), [r.worker, r.limit, r.leaseMs, r.kindsJson, 1]))
      return Effect.flatMap(levelOf(connection), (level) => {
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
      })
    }))
}

// Claims on a reserved connection, one at a time (a connection runs one
// statement at a time; claims are short). The reservation is dropped after a
// failed claim, so a broken connection (a database restart) is replaced by the
// next claim, and released when the scope closes, before the pool ends (a
// claim after that goes through the pool).
const reservedClaims = (
  sql: SqlClient,
  scope: Scope.Scope,
  qualify: (text: string) => string,
  pooled: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<PgClaimRow>, SqlError>
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
  const claimOn = (connection: Connection, text: string, params: ReadonlyArray<unknown>) =>
    (connection.execute(qualify(text), params, undefined) as Effect.Effect<ReadonlyArray<PgClaimRow>, SqlError>).pipe(
      Effect.tapErrorCause(() => drop)
    )
  return (text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<PgClaimRow>, SqlError> =>
    lock.withPermits(1)(Effect.suspend(() => {
      if (closed) return pooled(text, params)
      if (held === undefined) return Effect.flatMap(reserve, (connection) => claimOn(connection, text, params))
      // A held connection the server ended while it waited (idle_session_timeout,
      // an administrator, a pooler's restart) is replaced at once: its claim
      // never left this process, so it is sent again on a fresh one.
      return claimOn(held.connection, text, params).pipe(
        Effect.catchIf(endedBeforeSent, () => Effect.flatMap(reserve, (connection) => claimOn(connection, text, params)))
      )
    }))
}

// pg's answer to a statement on a connection that had already failed: the
// statement was not sent.
const endedBeforeSent = (error: SqlError): boolean =>
  error.cause instanceof Error && /is not queryable/.test(error.cause.message)

/**
 * `claimAcquire` for a dialect. PostgreSQL, given a claim scope: claims run on
 * one connection reserved from the pool on the first claim (and again after a
 * connection error), held until the scope closes: a worker woken from idle
 * claims without the pool's check-out, which cost 0.5-0.6 ms of the pickup
 * after idle (1.95-2.12 ms per claim round trip through the pool, 1.45 ms on
 * a reserved connection). SQLite: outside a transaction, on a connection
 * reserved for each claim (unsynced); in the caller's transaction the claim
 * commits with it.
 */
export const make = op<ClaimAcquire>({
  pg: ({ claimScope, cursors = new Cursors(), qualify, run, sql }: Db) => {
    const pooled = (text: string, params: ReadonlyArray<unknown>) => run<PgClaimRow>(text, params)
    // The reserved connection is past `run`: the text is qualified there (memoized: pgSchema.ts).
    const claim = claimScope === undefined ? pooled : reservedClaims(sql, claimScope, qualify, pooled)
    return (worker, limit, leaseMs, kinds, limitedMax, traceContext) =>
      Effect.suspend(() => {
        const walk = cursors.plan(kinds)
        const startedAt = cursors.now()
        const params = [worker, limit, leaseMs, kinds, limitedMax, walk.priorities, walk.runAts, walk.ids, walk.expiredAfter]
        return Effect.flatMap(claim(claimText(pg, traceContext), params), (rows) => {
          const { entriesRead, metrics } = cursors.record(kinds, walk, startedAt, rows)
          return Effect.as(
            Effect.zipRight(Metric.increment(metrics.claims), Metric.incrementBy(metrics.entries, entriesRead)),
            rows.filter((row) => row.id !== null)
          )
        })
      })
  },
  sqlite: ({ run, sql }: Db) => {
    const claimUnsynced = unsynced(sql)
    return (worker, limit, leaseMs, kinds, limitedMax, traceContext) => {
      const request = { worker, limit, leaseMs, kindsJson: kinds === null ? null : JSON.stringify(kinds), limitedMax, traceContext }
      return Effect.flatMap(Effect.serviceOption(TransactionConnection), (tx) =>
        Option.isSome(tx) ? inTransaction(run, request) : claimUnsynced(request))
    }
  }
})
