/**
 * PostgreSQL statements. Batches travel as parallel arrays expanded with
 * `unnest`, so one statement text serves any batch size. Times come from
 * `docket_now_ms()` (the database's clock).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Dialect } from "./dialect.js"
import type { ClaimRow, FencedRow, IdRow, ItemRow, KeyRow, OutcomeRow, StatsRow } from "./rows.js"
import { CLAIM_COLUMNS, ITEM_COLUMNS } from "./rows.js"

/** The channel enqueues notify and idle workers listen on. */
export const NOTIFY_CHANNEL = "docket_items"

// Inserts in input order (ids follow ORDER BY ord), skipping rows whose key a
// waiting item (or an earlier row of this batch) holds. One NOTIFY per
// statement, delivered when the enclosing transaction commits; PostgreSQL
// folds identical notifications of one transaction into one.
const INSERT = `
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[], $7::int[])
    WITH ORDINALITY AS t(kind, payload, dedupe_key, priority, run_at, delay_ms, max_attempts, ord)
), ins AS (
  INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, created_at, updated_at)
  SELECT i.kind, i.payload, i.dedupe_key, i.priority,
         coalesce(i.run_at, docket_now_ms() + i.delay_ms), i.max_attempts, docket_now_ms(), docket_now_ms()
  FROM input i ORDER BY i.ord
  ON CONFLICT DO NOTHING
  RETURNING id, kind, dedupe_key
)
SELECT id, kind, dedupe_key, (SELECT pg_notify('${NOTIFY_CHANNEL}', 'enqueued')) IS NULL AS notified
FROM ins ORDER BY id`

// One item (the common case): a server-side function with a kept plan
// (migrations/pg/0003_enqueue_function.sql), the same dedupe and NOTIFY.
const INSERT_ONE = `SELECT new_id AS id, new_kind AS kind, new_key AS dedupe_key
FROM docket_enqueue_one($1::text, $2::text, $3::text, $4::int, $5::bigint, $6::bigint, $7::int)`

const FIND_WAITING = `
SELECT i.id, i.kind, i.dedupe_key FROM docket_items i
JOIN unnest($1::text[], $2::text[]) AS p(kind, dedupe_key) ON i.kind = p.kind AND i.dedupe_key = p.dedupe_key
WHERE i.state = 'waiting' AND i.dedupe_key IS NOT NULL`

// The claim is a server-side function (migrations/pg/0002_claim_function.sql:
// what it does, and why a function: its plan, kept per session).
export const CLAIM = `SELECT ${CLAIM_COLUMNS} FROM docket_claim($1::text, $2::int, $3::bigint, $4::text[])`

const COMPLETE = `
DELETE FROM docket_items i USING unnest($1::bigint[], $2::bigint[]) AS c(id, seq)
WHERE i.id = c.id AND i.lease_seq = c.seq AND i.state = 'running'
RETURNING i.id, i.lease_seq`

// A failed item goes back to waiting unless it has no attempts left or the
// caller asked for dead (delay_ms null). A keyed item going back to waiting
// while a twin with its key waits is absorbed by the twin (deleted): the twin
// was enqueued after this item started, so it stands for the same work.
const FAIL = `
WITH input AS (
  SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS c(id, seq, error, delay_ms)
), target AS (
  SELECT i.id, i.kind, i.dedupe_key, c.error, c.delay_ms,
         (c.delay_ms IS NOT NULL AND i.attempts < i.max_attempts) AS retry
  FROM docket_items i JOIN input c ON i.id = c.id AND i.lease_seq = c.seq
  WHERE i.state = 'running'
  FOR UPDATE OF i
), absorbed AS (
  DELETE FROM docket_items d USING target t
  WHERE d.id = t.id AND t.retry AND t.dedupe_key IS NOT NULL
    AND EXISTS (SELECT 1 FROM docket_items w
                WHERE w.state = 'waiting' AND w.kind = t.kind AND w.dedupe_key = t.dedupe_key)
  RETURNING d.id, d.lease_seq
), updated AS (
  UPDATE docket_items u
  SET state = CASE WHEN t.retry THEN 'waiting' ELSE 'dead' END,
      run_at = CASE WHEN t.retry THEN docket_now_ms() + t.delay_ms ELSE u.run_at END,
      last_error = t.error, claimed_by = NULL, lease_until = NULL, updated_at = docket_now_ms()
  FROM target t
  WHERE u.id = t.id AND NOT EXISTS (SELECT 1 FROM absorbed a WHERE a.id = t.id)
  RETURNING u.id, u.lease_seq, u.state AS outcome
)
SELECT id, lease_seq, outcome FROM updated
UNION ALL SELECT id, lease_seq, 'absorbed' AS outcome FROM absorbed`

const RELEASE = `
WITH target AS (
  SELECT i.id, i.kind, i.dedupe_key
  FROM docket_items i JOIN unnest($1::bigint[], $2::bigint[]) AS c(id, seq) ON i.id = c.id AND i.lease_seq = c.seq
  WHERE i.state = 'running'
  FOR UPDATE OF i
), absorbed AS (
  DELETE FROM docket_items d USING target t
  WHERE d.id = t.id AND t.dedupe_key IS NOT NULL
    AND EXISTS (SELECT 1 FROM docket_items w
                WHERE w.state = 'waiting' AND w.kind = t.kind AND w.dedupe_key = t.dedupe_key)
  RETURNING d.id, d.lease_seq
), updated AS (
  UPDATE docket_items u
  SET state = 'waiting', attempts = greatest(u.attempts - 1, 0), claimed_by = NULL, lease_until = NULL,
      updated_at = docket_now_ms()
  FROM target t
  WHERE u.id = t.id AND NOT EXISTS (SELECT 1 FROM absorbed a WHERE a.id = t.id)
  RETURNING u.id, u.lease_seq, 'waiting' AS outcome
)
SELECT id, lease_seq, outcome FROM updated
UNION ALL SELECT id, lease_seq, 'absorbed' AS outcome FROM absorbed`

const EXTEND = `
UPDATE docket_items i SET lease_until = docket_now_ms() + $3, updated_at = docket_now_ms()
FROM unnest($1::bigint[], $2::bigint[]) AS c(id, seq)
WHERE i.id = c.id AND i.lease_seq = c.seq AND i.state = 'running'
RETURNING i.id, i.lease_seq`

// Shared with SQLite but for the clock expression.
export const statsSql = (now: string) => `
SELECT kind,
  sum(CASE WHEN (state = 'waiting' AND run_at <= ${now}) OR (state = 'running' AND lease_until <= ${now}) THEN 1 ELSE 0 END) AS due,
  sum(CASE WHEN state = 'waiting' AND run_at > ${now} THEN 1 ELSE 0 END) AS scheduled,
  sum(CASE WHEN state = 'running' AND lease_until > ${now} THEN 1 ELSE 0 END) AS running,
  sum(CASE WHEN state = 'dead' THEN 1 ELSE 0 END) AS dead
FROM docket_items GROUP BY kind ORDER BY kind`

const GET = `SELECT ${ITEM_COLUMNS} FROM docket_items WHERE id = $1`

const LIST_DEAD = `
SELECT ${ITEM_COLUMNS} FROM docket_items
WHERE state = 'dead' AND ($1::text IS NULL OR kind = $1) AND id > $2
ORDER BY id LIMIT $3`

// Retrying a dead item makes it waiting again with a fresh attempt budget. A
// dead item whose key a waiting item already holds (or a lower-id dead twin
// retried by the same call) stays dead: the waiting item stands for it.
const RETRY_DEAD = `
WITH candidates AS (
  SELECT DISTINCT ON (d.kind, d.dedupe_key IS NULL, coalesce(d.dedupe_key, d.id::text)) d.id
  FROM docket_items d
  WHERE d.state = 'dead' AND ($1::bigint[] IS NULL OR d.id = ANY($1::bigint[]))
    AND ($2::text IS NULL OR d.kind = $2)
    AND (d.dedupe_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM docket_items w WHERE w.state = 'waiting' AND w.kind = d.kind AND w.dedupe_key = d.dedupe_key))
  ORDER BY d.kind, d.dedupe_key IS NULL, coalesce(d.dedupe_key, d.id::text), d.id
), retried AS (
  UPDATE docket_items u
  SET state = 'waiting', attempts = 0, run_at = docket_now_ms(), claimed_by = NULL, lease_until = NULL,
      updated_at = docket_now_ms()
  FROM candidates c WHERE u.id = c.id
  RETURNING u.id
)
SELECT id, (SELECT pg_notify('${NOTIFY_CHANNEL}', 'retried')) IS NULL AS notified FROM retried`

const DELETE_DEAD = `
DELETE FROM docket_items
WHERE state = 'dead' AND ($1::bigint[] IS NULL OR id = ANY($1::bigint[])) AND ($2::text IS NULL OR kind = $2)
RETURNING id`

const NEXT_DUE = `
SELECT least(
  (SELECT min(run_at) FROM docket_items WHERE state = 'waiting'),
  (SELECT min(lease_until) FROM docket_items WHERE state = 'running')
) - docket_now_ms() AS wait_ms`


export const make = (sql: SqlClient): Dialect => {
  const run = <A extends object>(text: string, params: ReadonlyArray<unknown>) => sql.unsafe<A>(text, params)
  return {
    name: "pg",
    insert: (rows) =>
      rows.length === 1
        ? run<KeyRow>(INSERT_ONE, [
          rows[0].kind,
          rows[0].payload,
          rows[0].key,
          rows[0].priority,
          rows[0].runAt,
          rows[0].delayMs,
          rows[0].maxAttempts
        ])
        : run<KeyRow>(INSERT, [
        rows.map((r) => r.kind),
        rows.map((r) => r.payload),
        rows.map((r) => r.key),
        intArray(rows.map((r) => r.priority)),
        intArray(rows.map((r) => r.runAt)),
        intArray(rows.map((r) => r.delayMs)),
        intArray(rows.map((r) => r.maxAttempts))
      ]),
    findWaiting: (pairs) => run<KeyRow>(FIND_WAITING, [pairs.map((p) => p[0]), pairs.map((p) => p[1])]),
    claim: (worker, limit, leaseMs, kinds) => run<ClaimRow>(CLAIM, [worker, limit, leaseMs, kinds]),
    complete: (fences) => run<FencedRow>(COMPLETE, [intArray(fences.map((f) => f.id)), intArray(fences.map((f) => f.token))]),
    fail: (rows) =>
      run<OutcomeRow>(FAIL, [
        intArray(rows.map((r) => r.id)),
        intArray(rows.map((r) => r.token)),
        rows.map((r) => r.error),
        intArray(rows.map((r) => r.delayMs))
      ]),
    release: (fences) => run<OutcomeRow>(RELEASE, [intArray(fences.map((f) => f.id)), intArray(fences.map((f) => f.token))]),
    extend: (fences, leaseMs) =>
      run<FencedRow>(EXTEND, [intArray(fences.map((f) => f.id)), intArray(fences.map((f) => f.token)), leaseMs]),
    stats: run<StatsRow>(statsSql("docket_now_ms()"), []),
    get: (id) => run<ItemRow>(GET, [id]),
    listDead: (kind, afterId, limit) => run<ItemRow>(LIST_DEAD, [kind, afterId, limit]),
    retryDead: (selection) => run<IdRow>(RETRY_DEAD, [selection.ids, selection.kind]),
    deleteDead: (selection) => run<IdRow>(DELETE_DEAD, [selection.ids, selection.kind]),
    nextDue: run<{ wait_ms: number | string | null }>(NEXT_DUE, []),
    isUniqueViolation: (error: SqlError) => pgCode(error.cause) === "23505",
    atomic: (effect) => effect
  }
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
