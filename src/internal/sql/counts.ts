/**
 * Counts of what left the store (docket_counts, migrations/pg/0012_counts.sql):
 * each statement that takes finished items or retry counts out adds how many,
 * by kind, in the same statement (PostgreSQL) or transaction (SQLite); the
 * totals read them with what is still stored, in one snapshot.
 */

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
 * Every item that ever finished in each state, and every retry, by kind: the
 * counts of what left plus what is stored now, in one statement (one
 * snapshot: a prune between two reads would count its items twice or not
 * at all). Reads every finished item (an index-only count on PostgreSQL), so
 * it is for a scrape, not a hot path.
 */
const totals = `
SELECT kind, what, sum(n) AS n FROM (
  SELECT kind, what, n FROM docket_counts
  UNION ALL
  SELECT kind, state AS what, count(*) AS n FROM docket_items_all
  WHERE state IN ('done', 'dead', 'cancelled') GROUP BY kind, state
  UNION ALL
  SELECT kind, 'retried' AS what, sum(retried) AS n FROM docket_minute_counts GROUP BY kind
) t
GROUP BY kind, what
ORDER BY kind, what`

/** PostgreSQL: rows of (kind, what, n). */
export const pgTotals = totals

/** SQLite: rows of (kind, what, n). */
export const sqliteTotals = totals
