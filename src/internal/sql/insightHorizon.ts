/**
 * Who holds back the xmin horizon of the queue's PostgreSQL database past a
 * threshold (QueueRepo's `horizon`, the worker's horizon watch, `docket
 * stats`, the dashboard and /metrics): vacuum cannot remove a row version
 * deleted or updated after the oldest transaction some holder still needs,
 * so every claim and outcome since leaves dead rows, and dead index entries
 * the claim's index scan steps over, until the hold ends.
 *
 * Three kinds of holder, in one statement:
 * - sessions (pg_stat_activity) of this database with a snapshot
 *   (`backend_xmin`: a REPEATABLE READ transaction that has read, a long
 *   statement) or a transaction id (`backend_xid`: a transaction that wrote
 *   and stays open), whose transaction is older than the age; and walsenders
 *   of any database with an xmin (a standby's hot_standby_feedback without a
 *   slot holds every database back), which have no transaction, by the age in
 *   transactions of that xmin. Not this statement's own session, nor
 *   autovacuum (vacuum is ignored by the horizon), nor parallel workers (their
 *   leader is reported);
 * - replication slots (of every database: a slot's xmin holds the whole
 *   cluster) whose xmin or catalog_xmin is more than `transactions`
 *   transactions old. PostgreSQL 15 records no time for a slot, so its hold
 *   is measured as vacuum feels it: the transaction ids assigned since, each
 *   a transaction whose dead rows vacuum must keep. An idle database never
 *   reaches it, and there the hold costs nothing;
 * - prepared transactions of this database older than the age.
 *
 * Cheap: three small system views, no table of the queue. A role without
 * pg_read_all_stats (or pg_monitor) sees other roles' sessions without their
 * xmin, so they are not found: docs/operations.md.
 *
 * SQLite has no horizon: its equivalent (a long read holds the WAL from being
 * checkpointed back to its start) is not measured here (docs/concepts.md).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { HorizonHolder } from "../../Domain.js"
import { op } from "./db.js"
import { num, numOrNull } from "./rows.js"

/** PostgreSQL: $1 the age in ms, $2 the age in transactions; the rows of every holder past them. */
export const pg = `
WITH threshold AS (SELECT $1::float8 * interval '1 millisecond' AS age, $2::int AS xids)
SELECT * FROM (
  SELECT 1 AS rank, 'session' AS holder, a.pid::text AS name, a.application_name AS application,
         a.usename::text AS owner, a.state, a.backend_type AS detail, NULL::boolean AS active,
         (extract(epoch FROM a.xact_start) * 1000)::float8 AS since_ms,
         (extract(epoch FROM now() - a.xact_start) * 1000)::float8 AS age_ms,
         coalesce(a.backend_xmin, a.backend_xid)::text::bigint AS xmin,
         age(coalesce(a.backend_xmin, a.backend_xid)) AS xmin_age,
         NULL::bigint AS catalog_xmin, NULL::int AS catalog_xmin_age,
         left(split_part(coalesce(a.query, ''), E'\\n', 1), 200) AS query
  FROM pg_stat_activity a, threshold t
  WHERE a.pid <> pg_backend_pid() AND coalesce(a.backend_xmin, a.backend_xid) IS NOT NULL
    AND a.leader_pid IS NULL AND a.backend_type <> 'autovacuum worker'
    AND (a.datname = current_database() OR a.backend_type = 'walsender')
    AND CASE WHEN a.xact_start IS NULL THEN age(coalesce(a.backend_xmin, a.backend_xid)) > t.xids
             ELSE now() - a.xact_start > t.age END
  UNION ALL
  SELECT 2, 'slot', s.slot_name::text, NULL, NULL, NULL, s.slot_type, s.active, NULL, NULL,
         s.xmin::text::bigint, age(s.xmin), s.catalog_xmin::text::bigint, age(s.catalog_xmin), NULL
  FROM pg_replication_slots s, threshold t
  WHERE age(s.xmin) > t.xids OR age(s.catalog_xmin) > t.xids
  UNION ALL
  SELECT 3, 'prepared', p.gid, NULL, p.owner::text, NULL, NULL, NULL,
         (extract(epoch FROM p.prepared) * 1000)::float8, (extract(epoch FROM now() - p.prepared) * 1000)::float8,
         p.transaction::text::bigint, age(p.transaction), NULL, NULL, NULL
  FROM pg_prepared_xacts p, threshold t
  WHERE p.database = current_database() AND now() - p.prepared > t.age
) holders
ORDER BY rank, age_ms DESC NULLS LAST, greatest(xmin_age, catalog_xmin_age) DESC, name`

type Num = number | string | null

/** A row of `pg`, as the driver returns it. */
export interface HolderRow {
  readonly holder: "session" | "slot" | "prepared"
  readonly name: string
  readonly application: string | null
  readonly owner: string | null
  readonly state: string | null
  readonly detail: string | null
  readonly active: boolean | null
  readonly since_ms: Num
  readonly age_ms: Num
  readonly xmin: Num
  readonly xmin_age: Num
  readonly catalog_xmin: Num
  readonly catalog_xmin_age: Num
  readonly query: string | null
}

/** A row as the holder it describes. */
export const decode = (r: HolderRow): HorizonHolder => {
  switch (r.holder) {
    case "session":
      return {
        _tag: "Session",
        pid: num(r.name),
        applicationName: r.application ?? "",
        user: r.owner,
        state: r.state,
        backendType: r.detail ?? "",
        transactionStart: numOrNull(r.since_ms),
        transactionAgeMs: numOrNull(r.age_ms),
        xmin: num(r.xmin),
        xminAge: num(r.xmin_age),
        query: r.query ?? ""
      }
    case "slot":
      return {
        _tag: "Slot",
        slotName: r.name,
        slotType: r.detail ?? "",
        active: r.active === true,
        xmin: numOrNull(r.xmin),
        xminAge: numOrNull(r.xmin_age),
        catalogXmin: numOrNull(r.catalog_xmin),
        catalogXminAge: numOrNull(r.catalog_xmin_age)
      }
    case "prepared":
      return {
        _tag: "Prepared",
        gid: r.name,
        owner: r.owner ?? "",
        preparedAt: num(r.since_ms),
        ageMs: num(r.age_ms),
        xid: num(r.xmin),
        xidAge: num(r.xmin_age)
      }
  }
}

/**
 * The operation: the holders past `ageMs` and `transactions` (checked by the
 * caller), or none when the database has no horizon (SQLite).
 */
export type InsightHorizon = (
  ageMs: number,
  transactions: number
) => Effect.Effect<Option.Option<ReadonlyArray<HorizonHolder>>, SqlError>

/** `insightHorizon` for a dialect: SQLite runs nothing. */
export const make = op<InsightHorizon>({
  pg: (db) => (ageMs, transactions) =>
    Effect.map(db.run<HolderRow>(pg, [ageMs, transactions]), (rows) => Option.some(rows.map(decode))),
  sqlite: () => () => Effect.succeed(Option.none())
})
