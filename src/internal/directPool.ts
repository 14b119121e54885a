/**
 * The pg pool under a SqlClient Docket made itself (`Database.layer` provides
 * it as this service beside the client), so Docket's statements can skip
 * @effect/sql's statement machinery (a span, a scope, the acquirer) when
 * nobody reads the span. A client an application built has none, and its
 * statements go through `sql.unsafe` as before. The service travels in the
 * context beside the client: a context rebuilt with the SqlClient alone
 * loses it, and Docket then takes the (slower, equally correct) @effect/sql path.
 */
import { type SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import { SqlError as SqlErrorClass } from "@effect/sql/SqlError"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { createConnection } from "node:net"
import { defaultTracer } from "./tracing.js"

/** The pool and its cancel, beside the client built over it. */
export interface Service {
  /** The SqlClient built over this pool: statements through another client do not use it. */
  readonly client: SqlClient
  readonly pool: Pool
  /** Asks the server to cancel a session's statement, over a connection of its own (never the pool's): `cancelRequest`. */
  readonly cancel: (session: Session) => Promise<void>
  /** Runs `effect` with the pool's client-side statement timeout lifted (the migrations: Database.ts). */
  readonly unbounded: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** How Docket's own statements read their columns (`int8Numbers`). */
  readonly types: QueryTypes
}

/** pg's per-statement type parsers (a statement's `types`). */
export interface QueryTypes {
  getTypeParser(oid: number, format?: string): unknown
}

/** PostgreSQL's type oid of bigint (int8). */
const INT8 = 20

/**
 * Docket's own statements read bigint columns (ids, times in ms, lease
 * tokens, counts) as numbers, not as pg's default decimal strings that every
 * row's reader then turned into numbers (rows.ts `num`): a string and a
 * regular-expression test less per column per row (five in a claimed item).
 * Every such value is below 2^53; one that is not stays a string, which the
 * readers take as before. Other types keep `fallback`'s (the pool's) parsers.
 */
export const int8Numbers = (fallback: QueryTypes): QueryTypes => ({
  getTypeParser: (oid, format) => oid === INT8 && format !== "binary" ? readInt8 : fallback.getTypeParser(oid, format)
})

const readInt8 = (text: string): number | string => {
  const n = Number(text)
  return Number.isSafeInteger(n) ? n : text
}

/** What identifies a session to a cancel request: its BackendKeyData, as pg's Client keeps it. */
export interface Session {
  readonly processID: number | null
  readonly secretKey: number | null
}

/** The parts of pg's Pool and PoolClient Docket uses. */
export interface Pool {
  connect(callback: (error: Error | undefined, client: PoolClient | undefined) => void): void
}
export interface PoolClient extends Session {
  query(
    config: { readonly text: string; readonly values: Array<unknown>; readonly types: QueryTypes },
    callback: (error: Error | undefined, result: { readonly rows: Array<unknown> }) => void
  ): void
  release(error?: Error): void
  once(event: "error", listener: (error: Error) => void): unknown
  off(event: "error", listener: (error: Error) => void): unknown
}

// A statement straight to the pool, or to the caller's transaction connection,
// under Effect's built-in tracer (which exports nowhere). Under an application's
// tracer every statement keeps its sql.execute span. Measured, one enqueue at a
// time on one connection (10 x 300, medians): raw pg 405 us, sql.unsafe 484,
// Docket's enqueue through sql.unsafe 517 (client CPU 112 / 212 / 248 us); and
// after a 20 ms idle gap, where each piece of code runs from cold caches, the
// statement machinery alone cost 0.3 ms of a 1.2 ms round trip.
/** Runs one statement on the pool (or the caller's transaction), unless an application tracer wants its span. */
export const runner = (sql: SqlClient, target: Service) =>
<A extends object>(text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<A>, SqlError> =>
  Effect.withFiberRuntime((fiber) => {
    const tx = Context.getOption(fiber.currentContext, TransactionConnection)
    return Effect.tracerWith((tracer) => {
      if (tracer !== defaultTracer) return sql.unsafe<A>(text, params)
      if (Option.isSome(tx)) return tx.value[0].execute(text, params, undefined) as Effect.Effect<ReadonlyArray<A>, SqlError>
      return onPool<A>(target, text, params)
    })
  })

// One statement on a connection checked out of the pool. As @effect/sql-pg's
// own connection: a statement whose fiber was interrupted before it had a
// connection is never sent, and one interrupted while it runs is cancelled;
// a failed statement returns its connection (pg's pool.query would close it on
// any error, a unique violation included), and only a broken one is dropped.
// Better than it: the cancel goes over a connection of its own, so it is sent
// even when every pooled connection is busy, and the connection goes back only
// once its statement has ended (or is closed if it has not within 5 s).
const onPool = <A>({ cancel, pool, types }: Service, text: string, params: ReadonlyArray<unknown>) =>
  Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
    let client: PoolClient | undefined
    let released = false
    let interrupted = false
    let ended: (() => void) | undefined
    const release = (broken?: Error) => {
      if (client === undefined || released) return
      released = true
      client.off("error", onError)
      client.release(broken)
    }
    function onError(cause: Error) {
      release(cause)
      ended?.()
      resume(Effect.fail(new SqlErrorClass({ cause, message: "Connection error" })))
    }
    pool.connect((error, connected) => {
      if ((error !== undefined && error !== null) || connected === undefined) {
        resume(Effect.fail(new SqlErrorClass({ cause: error, message: "Failed to acquire connection" })))
        return
      }
      if (interrupted) {
        connected.release()
        return
      }
      client = connected
      connected.once("error", onError)
      connected.query({ text, values: params as Array<unknown>, types }, (failure, result) => {
        if (released) return
        release()
        ended?.()
        resume(
          failure === undefined || failure === null
            ? Effect.succeed(result.rows as Array<A>)
            : Effect.fail(new SqlErrorClass({ cause: failure, message: "Failed to execute statement" }))
        )
      })
    })
    return Effect.suspend(() => {
      interrupted = true
      const running = client
      if (running === undefined || released) return Effect.void
      return Effect.async<void>((done) => {
        if (released) return done(Effect.void)
        ended = () => done(Effect.void)
        cancel(running).catch(() => {})
      }).pipe(
        Effect.timeoutOption(5000),
        Effect.ensuring(Effect.sync(() => release(new Error("statement cancelled; it did not end within 5 s")))),
        Effect.asVoid
      )
    })
  })

/**
 * Asks the server at `address` to cancel what `session` runs: PostgreSQL's
 * cancel request (the session's process id and secret key, on a connection
 * of its own, no login), as libpq's PQcancel and pg's own cancel send it.
 * Not `SELECT pg_cancel_backend(pid)`: behind PgBouncer the process id a
 * client is given is PgBouncer's, random, and names no backend, while a
 * cancel request is forwarded by PgBouncer to the server connection running
 * that client's statement. Resolves once the server has closed the
 * connection (it answers nothing), rejects after `timeoutMs`. The connection
 * is left for the server to close, as libpq does: PgBouncer 1.18 exits
 * ("bad client state" in disconnect_client) when the client that sent a
 * cancel request closes first.
 */
export const cancelRequest = (
  address: { readonly host: string; readonly port: number },
  session: Session,
  timeoutMs: number
): Promise<void> =>
  new Promise((resolve, reject) => {
    if (session.processID === null || session.secretKey === null) return resolve()
    const message = Buffer.alloc(16)
    message.writeInt32BE(16, 0)
    message.writeInt32BE(80877102, 4) // the cancel request code (1234 << 16 | 5678)
    message.writeInt32BE(session.processID | 0, 8)
    message.writeInt32BE(session.secretKey | 0, 12)
    const socket = address.host.startsWith("/")
      ? createConnection(`${address.host}/.s.PGSQL.${address.port}`)
      : createConnection(address.port, address.host)
    const timer = setTimeout(() => socket.destroy(new Error(`no answer to the cancel request within ${timeoutMs} ms`)), timeoutMs)
    socket.once("connect", () => socket.write(message))
    // The server's close (it half-closes first): then close this side too.
    socket.once("end", () => socket.end())
    socket.once("error", reject)
    socket.once("close", () => {
      clearTimeout(timer)
      resolve()
    })
  })

/** The service tag (in the context `Database.layer` builds for PostgreSQL; not in its type: it is optional). */
export class DirectPool extends Context.Tag("docket/DirectPool")<DirectPool, Service>() {}
