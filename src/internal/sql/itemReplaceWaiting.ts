/**
 * Replace: the waiting items holding the keys of an enqueue's replacing rows
 * (`onConflict` "replace", "debounce", "replaceRunning") take those rows'
 * payloads, due times, groups and traces, and their priorities and max
 * attempts where given; their attempts, snoozes and errors start again. Each
 * keeps its id (so its place in an ordered group: claims take a group's items
 * in id order). A row whose key no item waits on changes nothing here: the
 * enqueue inserts it (internal/store/enqueue.ts).
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import * as Now from "./clock.js"
import { intArray, op } from "./db.js"
import type { InsertRow } from "./itemInsertMany.js"
import { NOTIFY_CHANNEL } from "./notify.js"
import type { KeyRow } from "./rows.js"

/**
 * The operation: the waiting items replaced, one per row at most. The rows
 * must name distinct (kind, key) pairs (each a key): which row a replaced
 * item took is told by its kind and key.
 */
export type ItemReplaceWaiting = (
  rows: ReadonlyArray<InsertRow>,
  traceContext: string | null
) => Effect.Effect<ReadonlyArray<KeyRow>, SqlError>

// What a replaced item's columns become: `due` is the row's due time (its
// runAt, else now plus its delay); a debounce row moves the due time only
// later. Attempts, snoozes and errors start again: the item is a new request
// (as graphile-worker's job_key replace resets attempts and last_error).
const SET = (now: string, trace: string, later: string) => `
  SET payload = t.payload, priority = coalesce(t.priority, i.priority),
      run_at = CASE WHEN t.debounce THEN ${later}(i.run_at, t.due) ELSE t.due END,
      max_attempts = coalesce(t.max_attempts, i.max_attempts),
      max_attempts_given = (i.max_attempts_given OR t.max_attempts IS NOT NULL),
      group_key = t.group_key, trace_context = ${trace},
      attempts = 0, snoozes = 0, last_error = NULL, errors = NULL, updated_at = ${now}`

// Which item a row replaces: the waiting one of its kind and key (FROM t).
const MATCH = `
  WHERE i.kind = t.kind AND i.dedupe_key = t.dedupe_key AND i.state = 'waiting' AND i.dedupe_key IS NOT NULL`

/**
 * PostgreSQL: $1 kinds, $2 the payloads as one JSON array, $3 keys, $4
 * priorities (NULL: not given), $5 due times (NULL: now plus $6's delay),
 * $7 max attempts (NULL: not given), $8 groups, $9 debounce flags, $10 the
 * span context. A row locked by a claim in flight is waited for and read
 * again: if the claim took it, it is no longer waiting and is not replaced.
 * One NOTIFY when any item changed (a due time may have moved earlier).
 */
export const pg = `
WITH t AS (
  SELECT r.kind, r.payload::text AS payload, r.dedupe_key, r.priority,
         coalesce(r.run_at, ${Now.pg} + r.delay_ms) AS due, r.max_attempts, r.group_key, r.debounce
  FROM ROWS FROM (json_array_elements($2::json), unnest($1::text[]), unnest($3::text[]), unnest($4::int[]),
                  unnest($5::bigint[]), unnest($6::bigint[]), unnest($7::int[]), unnest($8::text[]), unnest($9::boolean[]))
    AS r(payload, kind, dedupe_key, priority, run_at, delay_ms, max_attempts, group_key, debounce)
), upd AS (
  UPDATE docket_items i
  ${SET(Now.pg, "$10::text", "greatest")}
  FROM t${MATCH}
  RETURNING i.id, i.kind, i.dedupe_key
)
SELECT id, kind, dedupe_key, (SELECT pg_notify('${NOTIFY_CHANNEL}', 'enqueued')) IS NULL AS notified FROM upd`

/**
 * SQLite: ?1 a JSON array of [kind, payload, key, priority (null: not given),
 * runAt, delayMs, maxAttempts (null: not given), group, debounce (1 or 0)]
 * rows, ?2 the span context.
 */
export const sqlite = `
UPDATE docket_items AS i
${SET(Now.sqlite, "?2", "max")}
FROM (SELECT j.value ->> 0 AS kind, j.value ->> 1 AS payload, j.value ->> 2 AS dedupe_key, j.value ->> 3 AS priority,
             coalesce(j.value ->> 4, n.ms + (j.value ->> 5)) AS due, j.value ->> 6 AS max_attempts,
             j.value ->> 7 AS group_key, j.value ->> 8 AS debounce
      FROM json_each(?1) j, (SELECT ${Now.sqlite} AS ms) n) t${MATCH}
RETURNING id, kind, dedupe_key`

/** `itemReplaceWaiting` for a dialect. */
export const make = op<ItemReplaceWaiting>({
  pg: ({ run }) => (rows, traceContext) => {
    let payloads = "["
    for (let i = 0; i < rows.length; i++) payloads += (i === 0 ? "" : ",") + rows[i].payload
    payloads += "]"
    return run<KeyRow>(pg, [
      rows.map((r) => r.kind),
      payloads,
      rows.map((r) => r.key),
      intArray(rows.map((r) => (r.priorityGiven ? r.priority : null))),
      intArray(rows.map((r) => r.runAt)),
      intArray(rows.map((r) => r.delayMs)),
      intArray(rows.map((r) => r.maxAttempts)),
      rows.map((r) => r.group),
      rows.map((r) => r.onConflict === "debounce"),
      traceContext
    ])
  },
  sqlite: ({ run }) => (rows, traceContext) =>
    run<KeyRow>(sqlite, [
      JSON.stringify(rows.map((r) => [
        r.kind,
        r.payload,
        r.key,
        r.priorityGiven ? r.priority : null,
        r.runAt,
        r.delayMs,
        r.maxAttempts,
        r.group,
        r.onConflict === "debounce" ? 1 : 0
      ])),
      traceContext
    ])
})
