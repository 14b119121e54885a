/**
 * The SQLite claim: the statements of sql/claim.ts run so that paused and
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
import type { SqlClient } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit } from "effect"
import type { ClaimRow } from "./rows.js"
import * as Claim from "./sql/claim.js"

/** Runs one statement (numbered parameters) on the claim's connection. */
export type Exec = <A extends object>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>

/** A controlled kind as `sqliteControls` reads it. */
interface ControlRow {
  readonly kind: string
  readonly paused: number
  readonly rate_limit: number | null
  readonly concurrency_left: number | null
  readonly rate_left: number | null
}

/** What one claim asks for. */
export interface ClaimRequest {
  readonly worker: string
  readonly limit: number
  readonly leaseMs: number
  /** A JSON array of kinds, or null for every kind. */
  readonly kindsJson: string | null
  /** The most items of limited kinds (the pool's free slots). */
  readonly limitedMax: number
}

const limitedAmong = (controls: ReadonlyArray<ControlRow>) => controls.some((c) => !c.paused)

// The limited kinds' claims and then the rest, inside the write lock.
const claimLimited = (exec: Exec, r: ClaimRequest): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
  Effect.gen(function*() {
    const controls = yield* exec<ControlRow>(Claim.sqliteControls, [r.kindsJson])
    const claimed: Array<ClaimRow> = []
    let limitedLeft = Math.min(r.limit, r.limitedMax)
    for (const c of controls) {
      if (c.paused || limitedLeft <= 0) continue
      const allowed = Math.min(limitedLeft, c.concurrency_left ?? limitedLeft, c.rate_left ?? limitedLeft)
      if (allowed <= 0) continue
      const rows = yield* exec<ClaimRow>(Claim.sqlite, [r.worker, allowed, r.leaseMs, JSON.stringify([c.kind]), 0])
      if (rows.length > 0 && c.rate_limit !== null) yield* exec(Claim.sqliteTakeSlots, [c.kind, rows.length])
      limitedLeft -= rows.length
      claimed.push(...rows)
    }
    const remaining = r.limit - claimed.length
    if (remaining > 0) claimed.push(...(yield* exec<ClaimRow>(Claim.sqlite, [r.worker, remaining, r.leaseMs, r.kindsJson, 1])))
    return claimed
  })

/** A claim inside the caller's transaction (it commits with it). */
export const inTransaction = (exec: Exec, r: ClaimRequest): Effect.Effect<ReadonlyArray<ClaimRow>, SqlError> =>
  Effect.flatMap(exec<ControlRow>(Claim.sqliteControls, [r.kindsJson]), (controls) =>
    limitedAmong(controls)
      ? claimLimited(exec, r)
      : exec<ClaimRow>(Claim.sqlite, [r.worker, r.limit, r.leaseMs, r.kindsJson, 1]))

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
export const unsynced = (sql: SqlClient, compile: (text: string, params: ReadonlyArray<unknown>) => {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}) => {
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
        const c = compile(text, params)
        return connection.execute(c.text, c.params, undefined) as Effect.Effect<ReadonlyArray<A>, SqlError>
      }
      const claim = Effect.flatMap(exec<ControlRow>(Claim.sqliteControls, [r.kindsJson]), (controls) =>
        limitedAmong(controls)
          ? immediate(connection, exec, r)
          : exec<ClaimRow>(Claim.sqlite, [r.worker, r.limit, r.leaseMs, r.kindsJson, 1]))
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
