/**
 * SQLite statements. Batches travel as one JSON array parameter expanded with
 * `json_each`, so one prepared statement serves any batch size. SQLite has one
 * writer at a time: every multi-statement operation starts with a write, so
 * its transaction holds the write lock from its first statement (a deferred
 * transaction that reads first could fail to upgrade).
 */
import { type SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import type { Dialect } from "./dialect.js"
import { statsSql } from "./pg.js"
import type { ClaimRow, FencedRow, IdRow, ItemRow, KeyRow, OutcomeRow, StatsRow } from "./rows.js"
import { CLAIM_COLUMNS, ITEM_COLUMNS } from "./rows.js"

export const NOW = "CAST(unixepoch('subsec') * 1000 AS INTEGER)"

// `WHERE true` is SQLite's documented way to let ON CONFLICT follow INSERT ... SELECT.
const INSERT = `
INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, created_at, updated_at)
SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3,
       coalesce(j.value ->> 4, n.ms + (j.value ->> 5)), j.value ->> 6, n.ms, n.ms
FROM json_each(?1) j, (SELECT ${NOW} AS ms) n
WHERE true
ORDER BY j.key
ON CONFLICT DO NOTHING
RETURNING id, kind, dedupe_key`

const FIND_WAITING = `
SELECT i.id, i.kind, i.dedupe_key FROM docket_items i
JOIN json_each(?1) p ON i.kind = p.value ->> 0 AND i.dedupe_key = p.value ->> 1
WHERE i.state = 'waiting' AND i.dedupe_key IS NOT NULL`

// The same two sources as on PostgreSQL (expired leases and waiting items,
// the batch being the first of their union in claim order: see pg.ts), in one
// UPDATE ... RETURNING: SQLite serialises writers, so no two claimers can take
// one item.
const CLAIM = `
UPDATE docket_items
SET state = 'running', attempts = attempts + 1, lease_seq = lease_seq + 1, claimed_by = ?1,
    lease_until = ${NOW} + ?3, updated_at = ${NOW}
WHERE id IN (
  SELECT id FROM (
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'running' AND i.lease_until <= ${NOW}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
    UNION ALL
    SELECT * FROM (
      SELECT i.id, i.priority, i.run_at FROM docket_items i
      WHERE i.state = 'waiting' AND i.run_at <= ${NOW}
        AND (?4 IS NULL OR i.kind IN (SELECT value FROM json_each(?4)))
        AND (i.dedupe_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM docket_items r
          WHERE r.state = 'running' AND r.kind = i.kind AND r.dedupe_key = i.dedupe_key
            AND r.lease_until > ${NOW}))
      ORDER BY i.priority DESC, i.run_at, i.id LIMIT ?2)
  ) ORDER BY priority DESC, run_at, id LIMIT ?2
)
RETURNING ${CLAIM_COLUMNS}`

const COMPLETE = `
DELETE FROM docket_items
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq`

// Absorption first (see pg.ts): a retrying keyed item whose key a waiting twin holds is deleted.
const FAIL_ABSORB = `
DELETE FROM docket_items AS d
WHERE d.state = 'running' AND d.dedupe_key IS NOT NULL AND d.attempts < d.max_attempts
  AND EXISTS (SELECT 1 FROM json_each(?1) j
              WHERE j.value ->> 0 = d.id AND j.value ->> 1 = d.lease_seq AND j.value ->> 3 IS NOT NULL)
  AND EXISTS (SELECT 1 FROM docket_items w
              WHERE w.state = 'waiting' AND w.kind = d.kind AND w.dedupe_key = d.dedupe_key)
RETURNING id, lease_seq, 'absorbed' AS outcome`

const FAIL_UPDATE = `
UPDATE docket_items AS u
SET state = CASE WHEN c.delay_ms IS NOT NULL AND u.attempts < u.max_attempts THEN 'waiting' ELSE 'dead' END,
    run_at = CASE WHEN c.delay_ms IS NOT NULL AND u.attempts < u.max_attempts THEN ${NOW} + c.delay_ms ELSE u.run_at END,
    last_error = c.error, claimed_by = NULL, lease_until = NULL, updated_at = ${NOW}
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS seq, j.value ->> 2 AS error, j.value ->> 3 AS delay_ms
      FROM json_each(?1) j) AS c
WHERE u.id = c.id AND u.lease_seq = c.seq AND u.state = 'running'
RETURNING id, lease_seq, state AS outcome`

const RELEASE_ABSORB = `
DELETE FROM docket_items AS d
WHERE d.state = 'running' AND d.dedupe_key IS NOT NULL
  AND (d.id, d.lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
  AND EXISTS (SELECT 1 FROM docket_items w
              WHERE w.state = 'waiting' AND w.kind = d.kind AND w.dedupe_key = d.dedupe_key)
RETURNING id, lease_seq, 'absorbed' AS outcome`

const RELEASE_UPDATE = `
UPDATE docket_items
SET state = 'waiting', attempts = max(attempts - 1, 0), claimed_by = NULL, lease_until = NULL, updated_at = ${NOW}
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq, 'waiting' AS outcome`

const EXTEND = `
UPDATE docket_items SET lease_until = ${NOW} + ?2, updated_at = ${NOW}
WHERE state = 'running' AND (id, lease_seq) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) j)
RETURNING id, lease_seq`

const GET = `SELECT ${ITEM_COLUMNS} FROM docket_items WHERE id = ?1`

const LIST_DEAD = `
SELECT ${ITEM_COLUMNS} FROM docket_items
WHERE state = 'dead' AND (?1 IS NULL OR kind = ?1) AND id > ?2
ORDER BY id LIMIT ?3`

// See pg.ts: one item per (kind, key) is retried, and none whose key a waiting item holds.
const RETRY_DEAD = `
UPDATE docket_items
SET state = 'waiting', attempts = 0, run_at = ${NOW}, claimed_by = NULL, lease_until = NULL, updated_at = ${NOW}
WHERE id IN (
  SELECT min(d.id) FROM docket_items d
  WHERE d.state = 'dead' AND (?1 IS NULL OR d.id IN (SELECT value FROM json_each(?1)))
    AND (?2 IS NULL OR d.kind = ?2)
    AND (d.dedupe_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM docket_items w WHERE w.state = 'waiting' AND w.kind = d.kind AND w.dedupe_key = d.dedupe_key))
  GROUP BY d.kind, d.dedupe_key IS NULL, coalesce(d.dedupe_key, d.id)
)
RETURNING id`

const DELETE_DEAD = `
DELETE FROM docket_items
WHERE state = 'dead' AND (?1 IS NULL OR id IN (SELECT value FROM json_each(?1))) AND (?2 IS NULL OR kind = ?2)
RETURNING id`

// The next waiting item not yet due, through docket_items_scheduled (see
// NEXT_DUE in pg.ts and migrations/sqlite/0004_scheduled_index.sql).
const NEXT_DUE = `
SELECT min(
  coalesce((SELECT min(run_at) FROM docket_items
            WHERE state = 'waiting' AND run_at > created_at AND run_at > ${NOW}), 9007199254740991),
  coalesce((SELECT min(lease_until) FROM docket_items WHERE state = 'running'), 9007199254740991)
) - ${NOW} AS wait_ms`

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
    insert: (rows) =>
      run<KeyRow>(INSERT, [
        JSON.stringify(rows.map((r) => [r.kind, r.payload, r.key, r.priority, r.runAt, r.delayMs, r.maxAttempts]))
      ]).pipe(Effect.map((inserted) => [...inserted].sort((a, b) => Number(a.id) - Number(b.id)))),
    findWaiting: (pairs) => run<KeyRow>(FIND_WAITING, [JSON.stringify(pairs)]),
    claim: (worker, limit, leaseMs, kinds) => {
      const params = [worker, limit, leaseMs, kinds === null ? null : JSON.stringify(kinds)]
      // In the caller's transaction the claim commits with it.
      return Effect.flatMap(Effect.serviceOption(TransactionConnection), (tx) => {
        if (Option.isSome(tx)) return run<ClaimRow>(CLAIM, params)
        const c = compiled(CLAIM, params)
        return claimUnsynced(c.text, c.params)
      })
    },
    complete: (fences) => run<FencedRow>(COMPLETE, [fencesJson(fences)]),
    fail: (rows) => {
      const json = JSON.stringify(rows.map((r) => [r.id, r.token, r.error, r.delayMs]))
      return both(run<OutcomeRow>(FAIL_ABSORB, [json]), run<OutcomeRow>(FAIL_UPDATE, [json]))
    },
    release: (fences) => {
      const json = fencesJson(fences)
      return both(run<OutcomeRow>(RELEASE_ABSORB, [json]), run<OutcomeRow>(RELEASE_UPDATE, [json]))
    },
    extend: (fences, leaseMs) => run<FencedRow>(EXTEND, [fencesJson(fences), leaseMs]),
    stats: run<StatsRow>(statsSql(NOW), []),
    get: (id) => run<ItemRow>(GET, [id]),
    listDead: (kind, afterId, limit) => run<ItemRow>(LIST_DEAD, [kind, afterId, limit]),
    retryDead: (selection) =>
      run<IdRow>(RETRY_DEAD, [selection.ids === null ? null : JSON.stringify(selection.ids), selection.kind]),
    deleteDead: (selection) =>
      run<IdRow>(DELETE_DEAD, [selection.ids === null ? null : JSON.stringify(selection.ids), selection.kind]),
    nextDue: run<{ wait_ms: number | string | null }>(NEXT_DUE, []),
    isUniqueViolation: (error: SqlError) => {
      const cause = error.cause
      return typeof cause === "object" && cause !== null && "code" in cause &&
        (cause.code === "SQLITE_CONSTRAINT_UNIQUE" || cause.code === "SQLITE_CONSTRAINT_PRIMARYKEY")
    },
    atomic: (effect) => sql.withTransaction(effect)
  }
}
