/**
 * W6 for Docket: a big backlog built straight in the store with one
 * INSERT ... SELECT per part (generate_series on PostgreSQL, a recursive CTE
 * on SQLite), not through enqueue, so 2,000,000 rows take seconds:
 *
 * - `done` finished items, done in the last minutes (inside the default 24 h
 *   retention, so the pruner leaves them), as `complete` leaves them (in
 *   docket_done on PostgreSQL, in docket_items on SQLite);
 * - `waiting` items due in a day (behind the due ones in claim order; a
 *   worker must not touch them: their payload indexes are out of the run's
 *   range, so a claimed one fails the each-job-once check);
 * - `due` items due now, payloads { i: 0 .. due - 1 }: the drain.
 *
 * PostgreSQL: then `VACUUM ANALYZE` (what autovacuum does to a table that grew
 * this much; without it the first plans see an empty table). SQLite: nothing
 * (Docket runs no ANALYZE, so a deployment has no statistics either).
 */
import Database from "better-sqlite3"
import pg from "pg"
import * as Claim from "../../src/internal/sql/claimAcquire.js"
import * as Now from "../../src/internal/sql/clock.js"
import { median } from "../lib/stats.js"
import { pgProbe, sqliteProbe } from "./probes.js"
import type { Backlog, BacklogSizes, Target } from "./types.js"

const DAY_MS = 86_400_000

/**
 * $1 now (ms), $2 count, $3 first payload index (waiting) or enqueue time
 * (due). Done items are in docket_done on PostgreSQL (migration 0011), their
 * ids taken from docket_items' identity as an enqueue would.
 */
const PG_DONE = `
INSERT INTO docket_done (id, kind, payload, priority, state, run_at, attempts, max_attempts, lease_seq, claimed_by,
  created_at, updated_at, max_attempts_given, snoozes, finished_at)
SELECT nextval(pg_get_serial_sequence('docket_items', 'id')), 'bench', '{"i":-1,"t":0}', 0, 'done',
       $1::bigint - 60000 - g, 1, 8, 1, 'backlog', $1::bigint - 60000 - g, $1::bigint - g / 4, true, 0, $1::bigint - g / 4
FROM generate_series(1, $2::int) g`

const PG_WAITING = `
INSERT INTO docket_items (kind, payload, run_at, created_at, updated_at)
SELECT 'bench', '{"i":' || ($3::bigint + g) || ',"t":0}', $1::bigint + ${DAY_MS} + g, $1::bigint, $1::bigint
FROM generate_series(0, $2::int - 1) g`

const PG_DUE = `
INSERT INTO docket_items (kind, payload, run_at, created_at, updated_at)
SELECT 'bench', '{"i":' || g || ',"t":' || $3::text || '}', $1::bigint, $1::bigint, $1::bigint
FROM generate_series(0, $2::int - 1) g`

const series = "WITH RECURSIVE g(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM g WHERE x + 1 < @count)"

/** @now now (ms), @count count, @arg as above (better-sqlite3 binds named parameters). */
const SQLITE_DONE = `${series}
INSERT INTO docket_items (kind, payload, state, run_at, attempts, lease_seq, claimed_by, created_at, updated_at, finished_at)
SELECT 'bench', '{"i":-1,"t":0}', 'done', @now - 60001 - x, 1, 1, 'backlog', @now - 60001 - x, @now - x / 4, @now - x / 4 FROM g`

const SQLITE_WAITING = `${series}
INSERT INTO docket_items (kind, payload, run_at, created_at, updated_at)
SELECT 'bench', '{"i":' || (@arg + x) || ',"t":0}', @now + ${DAY_MS} + x, @now, @now FROM g`

const SQLITE_DUE = `${series}
INSERT INTO docket_items (kind, payload, run_at, created_at, updated_at)
SELECT 'bench', '{"i":' || x || ',"t":' || @arg || '}', @now, @now, @now FROM g`

const buildPg = async (url: string, sizes: BacklogSizes) => {
  const client = new pg.Client({ connectionString: url, application_name: "bench-backlog" })
  await client.connect()
  try {
    const now = Date.now()
    if (sizes.done > 0) await client.query(PG_DONE, [now, sizes.done])
    if (sizes.waiting > 0) await client.query(PG_WAITING, [now, sizes.waiting, sizes.due])
    await client.query(PG_DUE, [now, sizes.due, String(now)])
    await client.query("VACUUM ANALYZE docket_items")
    await client.query("VACUUM ANALYZE docket_done")
  } finally {
    await client.end()
  }
}

const buildSqlite = (file: string, sizes: BacklogSizes) => {
  const db = new Database(file, { fileMustExist: true })
  try {
    db.pragma("busy_timeout = 10000")
    const now = Date.now()
    db.transaction(() => {
      if (sizes.done > 0) db.prepare(SQLITE_DONE).run({ now, count: sizes.done })
      if (sizes.waiting > 0) db.prepare(SQLITE_WAITING).run({ now, count: sizes.waiting, arg: sizes.due })
      db.prepare(SQLITE_DUE).run({ now, count: sizes.due, arg: now })
    })()
    db.pragma("wal_checkpoint(TRUNCATE)")
  } finally {
    db.close()
  }
}

// Due and pending: waiting and due now (a range of the claim index: every
// item here has priority 0), or running. Not the waiting backlog behind them.
const duePending = (now: string) => `SELECT
  (SELECT count(*) FROM docket_items WHERE state = 'waiting' AND priority = 0 AND run_at <= ${now})
  + (SELECT count(*) FROM docket_items WHERE state = 'running') AS n`

/** PostgreSQL: `reps` claims of 10 items by Docket's claim statement, each in a transaction rolled back; the median ms. */
const claimAlonePg = async (url: string, reps = 15): Promise<number> => {
  const client = new pg.Client({ connectionString: url, application_name: "bench-claim" })
  await client.connect()
  try {
    const times: Array<number> = []
    for (let k = 0; k < reps; k++) {
      await client.query("BEGIN")
      const t0 = performance.now()
      const { rows } = await client.query(Claim.pg, ["bench-claim", 10, 30_000, null, 10, null, null, null, null])
      times.push(performance.now() - t0)
      await client.query("ROLLBACK")
      // The claim ends with a row without an item (the cursors' bookkeeping: sql/claimAcquire.ts).
      const items = rows.filter((row: { id: unknown }) => row.id !== null)
      if (items.length !== 10) throw new Error(`the claim took ${items.length} items, expected 10`)
    }
    return median(times)
  } finally {
    await client.end()
  }
}

/** SQLite: the same, in a write transaction rolled back (better-sqlite3 binds ?1 .. ?5 from an object). */
const claimAloneSqlite = (file: string, reps = 15): number => {
  const db = new Database(file, { fileMustExist: true })
  try {
    db.pragma("busy_timeout = 10000")
    const claim = db.prepare(Claim.sqlite)
    const times: Array<number> = []
    for (let k = 0; k < reps; k++) {
      db.exec("BEGIN IMMEDIATE")
      const t0 = performance.now()
      const rows = claim.all({ 1: "bench-claim", 2: 10, 3: 30_000, 4: null, 5: 1 })
      times.push(performance.now() - t0)
      db.exec("ROLLBACK")
      if (rows.length !== 10) throw new Error(`the claim took ${rows.length} items, expected 10`)
    }
    return median(times)
  } finally {
    db.close()
  }
}

export const docketBacklog: Backlog = {
  build: async (target, sizes) => {
    if (target.store === "pg") return buildPg(target.url, sizes)
    if (target.store === "sqlite") return buildSqlite(target.file, sizes)
    throw new Error("Docket runs on PostgreSQL or SQLite")
  },
  probe: (target: Target) => {
    if (target.store === "pg") return pgProbe(target.url, duePending(Now.pg))
    if (target.store === "sqlite") return sqliteProbe(target.file, duePending(Now.sqlite))
    throw new Error("Docket runs on PostgreSQL or SQLite")
  },
  claimStatement: (store) => (store === "pg" ? Claim.pg : Claim.sqlite),
  claimAlone: async (target) =>
    target.store === "pg" ? claimAlonePg(target.url) : target.store === "sqlite" ? claimAloneSqlite(target.file) : undefined
}
