/**
 * The server's limits on a session, as a provider or an administrator sets
 * them on Docket's role (`ALTER ROLE ... SET`): `statement_timeout`,
 * `idle_in_transaction_session_timeout` and `idle_session_timeout`. Read
 * once, when the pool is made (Database.ts), and said in one warning.
 *
 * What Docket does about each (docs/operations.md, "Provider settings"):
 * - `idle_session_timeout` ends any session idle that long, Docket's own
 *   included. Docket respects it instead of lifting it for its sessions: the
 *   pool closes its idle connections first (`poolIdleMs`), the LISTEN
 *   connection sends a keep-alive statement at half the limit (listen.ts), and
 *   the claim connection held between claims is reopened at once when the
 *   server ended it (sql/claimAcquire.ts), so no claim fails for it.
 * - `statement_timeout` is kept for every statement but the migrations', and
 *   their lock waits (Migrations.ts): a migration on a large table may rightly
 *   take minutes. A claim or an outcome it cancels fails and is retried as any
 *   failed statement is.
 * - `idle_in_transaction_session_timeout`: Docket never leaves a transaction
 *   idle (a transaction's statements follow one another); only an
 *   application's own transaction around an enqueue can meet it.
 */

/** The limits in ms; 0 for none. */
export interface Limits {
  readonly statementTimeoutMs: number
  readonly idleInTransactionMs: number
  readonly idleSessionMs: number
}

/** No limit set. */
export const none: Limits = { statementTimeoutMs: 0, idleInTransactionMs: 0, idleSessionMs: 0 }

/**
 * Reads the session's limits (all three are in ms in pg_settings).
 * `idle_session_timeout` is PostgreSQL 14's: an older server has no row for it.
 */
export const QUERY = `SELECT name, setting FROM pg_settings
WHERE name IN ('statement_timeout', 'idle_in_transaction_session_timeout', 'idle_session_timeout')`

/** The limits from `QUERY`'s rows. */
export const fromRows = (rows: ReadonlyArray<{ readonly name: string; readonly setting: string }>): Limits => {
  const ms = (name: string) => {
    const value = Number(rows.find((row) => row.name === name)?.setting ?? 0)
    return Number.isFinite(value) && value > 0 ? value : 0
  }
  return {
    statementTimeoutMs: ms("statement_timeout"),
    idleInTransactionMs: ms("idle_in_transaction_session_timeout"),
    idleSessionMs: ms("idle_session_timeout")
  }
}

/** How often an otherwise idle connection that must stay open runs a statement: half the idle limit (none without one). */
export const keepAliveMs = (idleSessionMs: number): number | undefined =>
  idleSessionMs > 0 ? Math.max(10, Math.floor(idleSessionMs / 2)) : undefined

/** How long the pool keeps an idle connection: its default, or less, so it closes it before the server does. */
export const poolIdleMs = (limits: Limits, poolDefaultMs: number): number => {
  const keepAlive = keepAliveMs(limits.idleSessionMs)
  return keepAlive === undefined ? poolDefaultMs : Math.min(poolDefaultMs, keepAlive)
}

const ms = (value: number) => value % 1000 === 0 ? `${value / 1000} s` : `${value} ms`

/** The one warning for the limits set, or undefined when none is. */
export const warning = (limits: Limits): string | undefined => {
  const parts: Array<string> = []
  if (limits.idleSessionMs > 0) {
    parts.push(
      `sessions idle for ${ms(limits.idleSessionMs)} are ended (idle_session_timeout): the LISTEN connection runs ` +
        `a keep-alive statement every ${ms(keepAliveMs(limits.idleSessionMs) ?? 0)}, idle pool connections are ` +
        `closed first, and a claim connection the server ended is reopened`
    )
  }
  if (limits.statementTimeoutMs > 0) {
    parts.push(
      `statements over ${ms(limits.statementTimeoutMs)} are cancelled (statement_timeout): migrations lift it for ` +
        `themselves, any other statement it cancels fails and is retried`
    )
  }
  if (limits.idleInTransactionMs > 0) {
    parts.push(
      `transactions idle for ${ms(limits.idleInTransactionMs)} are ended (idle_in_transaction_session_timeout): ` +
        `Docket's never are; an application's own transaction around an enqueue can be`
    )
  }
  if (parts.length === 0) return undefined
  return `docket: the server limits this role's sessions: ${parts.join("; ")}. ` +
    `Set them to 0 for Docket's role to avoid the extra statements (docs/operations.md, "Provider settings").`
}
