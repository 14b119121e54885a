/**
 * Absorption, written once for every statement that sends a running item back
 * to waiting (fail with a retry, release). A keyed item going back to waiting
 * while a twin with its key waits is absorbed by the twin (deleted): the twin
 * was enqueued after this item started, so it stands for the same work. (The
 * unique index allows one waiting item per kind and key, so the item could
 * not wait beside it anyway.)
 */

/**
 * True when a waiting item holds the kind and dedupe key of the row `of`
 * (an alias with `kind` and `dedupe_key` columns). Also used by retryDead: a
 * dead item whose key a waiting item holds stays dead.
 */
export const waitingTwin = (of: string) => `EXISTS (SELECT 1 FROM docket_items w
                WHERE w.state = 'waiting' AND w.kind = ${of}.kind AND w.dedupe_key = ${of}.dedupe_key)`

/** How the rows that are not absorbed change (PostgreSQL). */
export interface PgUpdate {
  /** Only rows of `target` for which this holds may be absorbed (any, when left out). */
  readonly absorbIf?: string
  /**
   * The SET clause for the rows that are not absorbed, in terms of the item
   * `u` alone (values given per item are read from the statement's arrays
   * with ./held.ts's pgGiven, not from `target`: see below).
   */
  readonly set: string
  /** The outcome those rows report. */
  readonly outcome: string
  /** More CTEs after `updated` (each `name AS (...)`, comma-separated), e.g. a write that reads it. */
  readonly then?: string
}

/**
 * PostgreSQL: the CTEs that follow a `target` CTE (the fenced running rows,
 * locked, with their kind and dedupe_key) and the final SELECT: `absorbed`
 * deletes the rows whose twin waits, `updated` applies the change to the rest.
 * One row per target: its id, token and outcome (`absorbed` or the update's).
 *
 * Both find their rows by primary key (`id = ANY(ARRAY(...))`), never by a
 * join with `target`: a join's plan follows the statistics, which can call a
 * table of a million dead index entries "one row" (./held.ts says when), and
 * then reads the table whole.
 */
export const pg = ({ absorbIf, outcome, set, then }: PgUpdate) => `absorbed AS (
  DELETE FROM docket_items d
  WHERE d.id = ANY(ARRAY(
    SELECT t.id FROM target t
    WHERE ${absorbIf === undefined ? "" : `${absorbIf} AND `}t.dedupe_key IS NOT NULL AND ${waitingTwin("t")}))
  RETURNING d.id, d.lease_seq
), updated AS (
  UPDATE docket_items u
  ${set}
  WHERE u.id = ANY(ARRAY(SELECT t.id FROM target t)) AND u.id <> ALL(ARRAY(SELECT a.id FROM absorbed a))
  RETURNING u.id, u.lease_seq, ${outcome} AS outcome
)${then === undefined ? "" : `, ${then}`}
SELECT id, lease_seq, outcome FROM updated
UNION ALL SELECT id, lease_seq, 'absorbed' AS outcome FROM absorbed`

/**
 * SQLite: a statement of its own, run first in the operation's transaction
 * (the update after it no longer finds the absorbed rows). Deletes the running
 * keyed rows `targets` selects (a condition on `d`) whose twin waits; each
 * row returned carries its kind (fail counts the retries by kind).
 */
export const sqlite = (targets: string) => `
DELETE FROM docket_items AS d
WHERE d.state = 'running' AND d.dedupe_key IS NOT NULL
  AND ${targets}
  AND ${waitingTwin("d")}
RETURNING id, lease_seq, 'absorbed' AS outcome, kind`
