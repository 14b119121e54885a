/**
 * Counts of what left the store (docket_counts, migrations/pg/0012_counts.sql):
 * each statement that takes finished items or retry counts out adds how many,
 * by kind, in the same statement (PostgreSQL) or transaction (SQLite); the
 * totals read them with what is still stored, in one snapshot.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { type Db, op } from "./db.js"
import { type DeadSelection, type IdRow, toIds } from "./rows.js"

/**
 * PostgreSQL: a CTE that adds the rows of `from` (a CTE of the same
 * statement with columns kind and n) to the counts of `what` (a constant or
 * a parameter mark). Data-modifying CTEs run whether or not the query reads them.
 * Rows are upserted in kind order, so two statements counting several kinds
 * lock them in the same order and never deadlock (as fail orders its rows).
 */
export const pgAdd = (name: string, from: string, what: string) => `${name} AS (
  INSERT INTO docket_counts (kind, what, n)
  SELECT kind, ${what}, sum(n) FROM ${from} GROUP BY kind ORDER BY kind
  ON CONFLICT (kind, what) DO UPDATE SET n = docket_counts.n + excluded.n
)`

/** SQLite: ?1 a JSON array of [kind, what, n], added to the counts. */
export const sqliteAdd = `
INSERT INTO docket_counts (kind, what, n)
SELECT j.value ->> 0, j.value ->> 1, sum(j.value ->> 2) FROM json_each(?1) j WHERE true GROUP BY 1, 2
ON CONFLICT (kind, what) DO UPDATE SET n = docket_counts.n + excluded.n`

/**
 * SQLite: a statement that takes finished items (or retry counts) out of the
 * store, and the count of what it took added to docket_counts (`sqliteAdd`),
 * in one transaction: a reader of the totals sees both or neither. `n`: how
 * many each row counts for (1 by default).
 */
export const sqliteCounting = <A extends { readonly kind: string }>(
  { run, transaction }: Db,
  take: Effect.Effect<ReadonlyArray<A>, SqlError>,
  what: string,
  n: (row: A) => number = () => 1
): Effect.Effect<ReadonlyArray<A>, SqlError> =>
  transaction(Effect.gen(function*() {
    const rows = yield* take
    if (rows.length > 0) {
      const counts = rows.map((r) => [r.kind, what, n(r)])
      yield* run(sqliteAdd, [JSON.stringify(counts)])
    }
    return rows
  }))

/**
 * An operation on a selection of dead items (deadRetry, deadDelete): the ids
 * it took, ascending, each counted as a dead item that left the store. `pg`
 * counts in its own statement (`pgAdd`); `sqlite` in the same transaction
 * (`sqliteCounting`). $1/?1 the ids (NULL for all), $2/?2 the kind (NULL for all).
 */
export const deadSelection = (pg: string, sqlite: string) =>
  op<(selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, SqlError>>({
    pg: ({ run }) => (selection) => Effect.map(run<IdRow>(pg, [selection.ids, selection.kind]), toIds),
    sqlite: (db) => (selection) =>
      sqliteCounting(
        db,
        db.run<IdRow & { kind: string }>(sqlite, [selection.ids === null ? null : JSON.stringify(selection.ids), selection.kind]),
        "dead"
      ).pipe(Effect.map(toIds))
  })
