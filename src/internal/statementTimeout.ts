/**
 * The client-side statement timeout of Docket's PostgreSQL pool: a statement
 * with no answer within the bound closes its connection, and fails (with the
 * statements queued behind it on that connection) with an error that says so.
 *
 * Why on the client: a database gone silent (a partition, a host that
 * vanished: no answer, no error, no RST) leaves a statement waiting until TCP
 * gives up, about 15 minutes on Linux, and whatever waits on it (a claim, a
 * heartbeat, an application's enqueue) waits as long. The server's own
 * `statement_timeout` cannot help: the server may never see the statement, or
 * its answer never arrives. Closing the connection (not only failing the
 * call) matters: given back to the pool, a connection whose statement is
 * still on the wire would hang the next statement handed to it.
 *
 * Only callback calls are bounded (every statement of @effect/sql-pg and of
 * Docket's own pool runner); promise and cursor calls are left as they are.
 * The bound is read at each statement (`limit`), so the migrations, whose
 * statements on a large table may rightly take minutes, run without it
 * (Database.ts).
 */
import type { EventEmitter } from "node:events"

/** The parts of pg's Client this needs. */
interface BoundedClient extends EventEmitter {
  query: (...args: Array<any>) => unknown
  readonly connection?: { readonly stream?: { destroy(error?: Error): void } }
}

/** Bounds every callback statement of `client` to `limit()` ms, read as it is sent (0 or less, or not finite: no bound). */
export const bound = (client: BoundedClient, limit: () => number): void => {
  const query = client.query
  client.query = function(this: unknown, ...args: Array<any>) {
    const callback = args[args.length - 1]
    const ms = limit()
    if (typeof callback !== "function" || !(ms > 0) || !Number.isFinite(ms)) return query.apply(this, args)
    const timer = setTimeout(() => {
      // pg fails every statement of the connection with this error, emits it
      // as the connection's error (the pool's user drops the connection), and
      // the pool never hands the connection out again.
      client.connection?.stream?.destroy(
        new Error(`statement timed out after ${ms} ms with no answer from the database (client side); connection closed`)
      )
    }, ms)
    timer.unref()
    args[args.length - 1] = function(this: unknown, ...results: Array<unknown>) {
      clearTimeout(timer)
      return callback.apply(this, results)
    }
    return query.apply(this, args)
  }
}
