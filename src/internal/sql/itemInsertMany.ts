/**
 * Enqueue: inserting items, in input order, skipping those whose key a waiting
 * item holds (the dedupe protocol around it: internal/store/enqueue.ts).
 * Returns the inserted rows in id order; `traceContext`: the enqueuer's W3C
 * traceparent, stored with every row (null outside a trace).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { OnConflict } from "../../Domain.js"
import * as Now from "./clock.js"
import { intArray, op } from "./db.js"
import { NOTIFY_CHANNEL } from "./notify.js"
import type { KeyRow } from "./rows.js"

/** One checked, encoded enqueue request (internal/store/prepare.ts makes it). */
export interface InsertRow {
  readonly kind: string
  readonly payload: string
  readonly key: string | null
  readonly priority: number
  /** Absolute due time, or null to use the database's now plus `delayMs`. */
  readonly runAt: number | null
  readonly delayMs: number
  /** Null when the request gave none (its claimer decides). */
  readonly maxAttempts: number | null
  /** The item's group inside its kind (stored as group_key), or null. */
  readonly group: string | null
  /** What the enqueue does when a waiting item holds its key (the insert ignores it: internal/store/enqueue.ts). */
  readonly onConflict: OnConflict
  /** Whether the request gave its priority (a replace changes the waiting item's only then). */
  readonly priorityGiven: boolean
}

/** The operation: rows inserted, in id order. */
export type ItemInsertMany = (
  rows: ReadonlyArray<InsertRow>,
  traceContext: string | null
) => Effect.Effect<ReadonlyArray<KeyRow>, SqlError>

// What max_attempts holds when the enqueue gave none (max_attempts_given
// false): the budget workers of earlier versions read
// (migrations/*/0005_attempts_default_and_trace.sql).
const STORED_DEFAULT = 8

// A batch insert, in input order (ids follow ORDER BY ord). The payloads
// travel as one JSON array (their JSON texts joined: no per-item escaping on
// the client, one parse on the server; `json` keeps each element's text as
// sent). Every other column is either an array ($1, $3-$7) or, when the whole
// batch shares one value, a NULL array and the scalar ($8-$12): a bulk enqueue
// of one kind sends little besides its payloads. Measured on 20,000 rows in
// batches of 2,000 against the text-array form this replaces: 1.5-1.8x.
//
// Keyed batches skip rows whose key a waiting item (or an earlier row of this
// batch) holds (ON CONFLICT DO NOTHING) and return the inserted rows. A batch
// without keys cannot conflict (the unique index covers keyed rows only), so
// it inserts without ON CONFLICT (speculative insertion wrote an extra WAL
// record per row: 6-17% of the statement) and returns its ids as one array.
// One NOTIFY per statement, delivered when the enclosing transaction commits.
// A NULL max attempts is one not given ($12 NULL too: none of the batch gave
// one); the batch shares one span context ($13, NULL outside a trace).
const pgMany = (keyed: boolean, grouped: boolean) => `
WITH ins AS (
  INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, max_attempts_given,
                            trace_context, created_at, updated_at${grouped ? ", group_key" : ""})
  SELECT coalesce(t.kind, $8), t.payload::text, t.dedupe_key, coalesce(t.priority, $9),
         coalesce(t.run_at, $10, ${Now.pg} + coalesce(t.delay_ms, $11)),
         coalesce(t.max_attempts, $12, ${STORED_DEFAULT}), coalesce(t.max_attempts, $12) IS NOT NULL,
         $13::text, ${Now.pg}, ${Now.pg}${grouped ? ", t.group_key" : ""}
  FROM ROWS FROM (json_array_elements($2::json), unnest($1::text[]), unnest($3::text[]), unnest($4::int[]),
                  unnest($5::bigint[]), unnest($6::bigint[]), unnest($7::int[])${grouped ? ", unnest($14::text[])" : ""})
    WITH ORDINALITY AS t(payload, kind, dedupe_key, priority, run_at, delay_ms, max_attempts${grouped ? ", group_key" : ""}, ord)
  ORDER BY t.ord
  ${keyed ? "ON CONFLICT DO NOTHING" : ""}
  RETURNING id, kind, dedupe_key
)
${
  keyed
    ? "SELECT id, kind, dedupe_key, (SELECT pg_notify('" + NOTIFY_CHANNEL + "', 'enqueued')) IS NULL AS notified FROM ins ORDER BY id"
    : "SELECT array_agg(id ORDER BY id)::text AS ids, (SELECT pg_notify('" + NOTIFY_CHANNEL + "', 'enqueued')) IS NULL AS notified FROM ins"
}`

/** PostgreSQL, a batch with at least one key: returns the inserted rows (`KeyRow`) in id order. */
export const pgKeyed = pgMany(true, false)

/** PostgreSQL, a batch without keys: returns one row, `ids`, every inserted id as an array in id order. */
export const pgPlain = pgMany(false, false)

/**
 * PostgreSQL, the two batches above with groups ($14, every row's group or
 * NULL): a batch of ungrouped items keeps the texts above, so it sends and
 * writes nothing more than before groups existed. A single grouped item goes
 * this way too (docket_enqueue_one knows no groups).
 */
export const pgKeyedGrouped = pgMany(true, true)
/** PostgreSQL: see `pgKeyedGrouped`. */
export const pgPlainGrouped = pgMany(false, true)

/**
 * PostgreSQL, one item (the common case): a server-side function with a kept
 * plan (migrations/pg/0003_enqueue_function.sql, with the span context since
 * 0005), the same dedupe and NOTIFY; since 0014 an item without a key is
 * inserted without ON CONFLICT, as pgPlain does; since 0016 it notifies the
 * channel it is given (the schema's: pgSchema.ts rewrites it, as every
 * channel here). $7 max attempts or NULL (not given), $8 the span context or NULL.
 */
export const pgOne = `SELECT new_id AS id, new_kind AS kind, new_key AS dedupe_key
FROM docket_enqueue_one($1::text, $2::text, $3::text, $4::int, $5::bigint, $6::bigint, $7::int, $8::text, '${NOTIFY_CHANNEL}')`

/**
 * SQLite, any batch: ?1 is a JSON array of [kind, payload, key, priority,
 * runAt, delayMs, maxAttempts (null: not given), group (left out for none)] rows, ?2 the batch's span
 * context or NULL. `WHERE true` is SQLite's documented way to let ON CONFLICT
 * follow INSERT ... SELECT.
 */
export const sqlite = `
INSERT INTO docket_items (kind, payload, dedupe_key, priority, run_at, max_attempts, max_attempts_given,
                          trace_context, created_at, updated_at, group_key)
SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3,
       coalesce(j.value ->> 4, n.ms + (j.value ->> 5)), coalesce(j.value ->> 6, ${STORED_DEFAULT}),
       j.value ->> 6 IS NOT NULL, ?2, n.ms, n.ms, j.value ->> 7
FROM json_each(?1) j, (SELECT ${Now.sqlite} AS ms) n
WHERE true
ORDER BY j.key
ON CONFLICT DO NOTHING
RETURNING id, kind, dedupe_key`

// The parameters of a batch insert (pgKeyed, pgPlain): payloads as one JSON array, each other column
// as an array, or as a NULL array and a scalar when the batch shares its value;
// the span context, one for the batch.
const batchParams = (
  rows: ReadonlyArray<InsertRow>,
  keyed: boolean,
  grouped: boolean,
  traceContext: string | null
): Array<unknown> => {
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
  const params = [kinds, payloads, keys, priorities, runAts, delays, maxAttempts, kind, priority, runAt, delay, maxAttempt, traceContext]
  if (grouped) params.push(rows.map((r) => r.group))
  return params
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

/** `itemInsertMany` for a dialect. */
export const make = op<ItemInsertMany>({
  pg: ({ run }) => (rows, traceContext) => {
    const grouped = rows.some((r) => r.group !== null)
    if (rows.length === 1 && !grouped) {
      const r = rows[0]
      return run<KeyRow>(pgOne, [r.kind, r.payload, r.key, r.priority, r.runAt, r.delayMs, r.maxAttempts, traceContext])
    }
    const keyed = rows.some((r) => r.key !== null)
    const params = batchParams(rows, keyed, grouped, traceContext)
    if (keyed) return run<KeyRow>(grouped ? pgKeyedGrouped : pgKeyed, params)
    return run<{ ids: string | null }>(grouped ? pgPlainGrouped : pgPlain, params).pipe(
      Effect.map((result) => idsAsRows(rows, result[0].ids))
    )
  },
  sqlite: ({ run }) => (rows, traceContext) =>
    run<KeyRow>(sqlite, [
      JSON.stringify(rows.map((r) =>
        r.group === null
          ? [r.kind, r.payload, r.key, r.priority, r.runAt, r.delayMs, r.maxAttempts]
          : [r.kind, r.payload, r.key, r.priority, r.runAt, r.delayMs, r.maxAttempts, r.group]
      )),
      traceContext
    ]).pipe(Effect.map((inserted) => [...inserted].sort((a, b) => Number(a.id) - Number(b.id))))
})
