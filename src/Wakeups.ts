/**
 * `Wakeups`: how a worker pool learns that there may be new items to claim,
 * without waiting for its poll.
 *
 * Each pool takes a `Signal` of its own (`signal`), which wakes it on:
 * - an enqueue through a `QueueRepo` of this process (`enqueued`, called by the
 *   repository after every enqueue that added an item; inside the caller's
 *   transaction the items are visible only at its commit, which nobody can
 *   see, so the signal fires again at 5, 25, 100 and 400 ms);
 * - on PostgreSQL, a notification from an enqueue in any process (LISTEN on a
 *   connection of the pool's own, reconnected after it is lost: a database
 *   restart; every (re)connect is followed by a wake-up, since notifications
 *   sent while not listening are gone). The connection goes to the pool's
 *   database, or to `Database.Options.listenDatabase` when given (a direct
 *   URL beside a transaction-pooling PgBouncer). It first proves that it hears
 *   what the pool sends (internal/listen.ts); when it does not (LISTEN through
 *   a transaction pooler), the pool stops listening, one warning says what to
 *   set, and other processes' items are found by the poll;
 * - on a SQLite file, a commit by another process (or another connection of
 *   this one): one `fs.watch` of the file's directory per queue, shared by its
 *   pools while any listens (internal/sqliteWatch.ts, where the measured
 *   choice over polling `PRAGMA data_version` is explained); not for
 *   `:memory:`, which no other process sees;
 * - the pool's own nudges (`notify`: a slot freed, a retry came due).
 *
 * A pool that passes `onCancel` also hears of running items a cancel stopped
 * (`QueueRepo.cancel`), to interrupt its runs of them: cancels through a
 * `QueueRepo` of this process (`cancelled`, while its LISTEN connection does
 * not hear the cancel channel: before it listens, between reconnects, after
 * it gave up), and on PostgreSQL cancels in any process (the same LISTEN
 * connection, on the cancel channel). A notice is only a hint: the pool reads
 * the item's state before it stops anything.
 *
 * `QueueRepo.layer` provides it beside the repository: the watching one on
 * SQLite, the listening one on PostgreSQL. A repository and the pools that
 * claim from it share one instance (each `QueueRepo.layer` builds its own,
 * so two queues on two databases in one application never share wake-ups).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { describe as describeTarget } from "./Database.js"
import { listen, NotHeard, type Probe } from "./internal/listen.js"
import type * as PgSchema from "./internal/pgSchema.js"
import { remoteTarget } from "./internal/remoteTarget.js"
import { Signal as WakeSignal } from "./internal/signal.js"
import * as SqliteWatch from "./internal/sqliteWatch.js"
import { parseCancelIds } from "./internal/sql/notify.js"

/** One pool's wake-up: `notify` from anywhere, `wait` by the pool's claimer (one waiter at a time). */
export interface Signal {
  /** Wakes the waiter, or the next `wait` if none waits. Safe from any callback. */
  readonly notify: () => void
  /** Returns at the next `notify` (at once if one came since the last wait), or after `ms`. */
  readonly wait: (ms: number) => Effect.Effect<void>
  /** A notify came that no `wait` has taken yet (the waiter is busy): its next `wait` returns at once. */
  readonly pending: () => boolean
}

/** How a pool's signal is woken. */
export interface SignalOptions {
  /**
   * Also wake on other processes' enqueues (PostgreSQL LISTEN, a watch of the
   * SQLite file; default true).
   */
  readonly listen?: boolean | undefined
  /**
   * Called with the ids of running items a cancel stopped (see the module
   * doc); from any callback, so it must not block.
   */
  readonly onCancel?: ((ids: ReadonlyArray<number>) => void) | undefined
}

/** The service. */
export interface Service {
  /** A new signal for one pool, woken as described above until the scope closes. */
  readonly signal: (options?: SignalOptions) => Effect.Effect<Signal, never, Scope.Scope>
  /**
   * Items were added in this process (run where the enqueue ran: inside the
   * caller's transaction, the signals fire again after its likely commit).
   * Costs nothing while no pool has a signal.
   */
  readonly enqueued: Effect.Effect<void>
  /**
   * Running items were cancelled in this process: their ids go to this
   * process's pools that do not hear of cancels from the database (inside the
   * caller's transaction, again after its likely commit, as for `enqueued`).
   */
  readonly cancelled: (ids: ReadonlyArray<number>) => Effect.Effect<void>
}

/** The `Wakeups` service tag. */
export class Wakeups extends Context.Tag("docket/Wakeups")<Wakeups, Service>() {}

// After an enqueue inside the caller's transaction: when to look again.
const TRANSACTION_RETRIES_MS = [5, 25, 100, 400]

/**
 * What a listening signal runs (in its scope): waking `notify` on other
 * processes' enqueues, and, if `cancels`, calling `onCancel` (when given) on
 * their cancels.
 */
interface Remote {
  /**
   * `hearsCancels` is told whether the cancel channel is heard now (so this
   * process's cancels need not be passed on by hand), as that changes.
   */
  readonly run: (
    notify: () => void,
    onCancel: ((ids: ReadonlyArray<number>) => void) | undefined,
    hearsCancels: (yes: boolean) => void
  ) => Effect.Effect<never>
  readonly cancels: boolean
}

/**
 * Wake-ups within this process only; `remote`, when given, is run for each
 * signal that asks to listen (in the signal's scope) with the signal's notify.
 */
const make = (remote?: Remote): Service => {
  const signals = new Set<() => void>()
  // The cancel callbacks of the pools that do not hear of cancels from the database.
  const localCancels = new Set<(ids: ReadonlyArray<number>) => void>()
  const register = <A>(set: Set<A>, value: A) =>
    Effect.acquireRelease(Effect.sync(() => set.add(value)), () => Effect.sync(() => set.delete(value)))
  // Runs `f` now and, inside the caller's transaction, again after its likely commit.
  const afterCommit = (f: () => void) =>
    Effect.map(Effect.serviceOption(SqlClient.TransactionConnection), (tx) => {
      f()
      if (Option.isSome(tx)) for (const ms of TRANSACTION_RETRIES_MS) setTimeout(f, ms).unref()
    })
  return {
    signal: (options = {}) =>
      Effect.gen(function*() {
        const signal = new WakeSignal()
        yield* register(signals, signal.notify)
        const listens = remote !== undefined && options.listen !== false
        const onCancel = options.onCancel
        // This process's cancels go to the pool by hand unless its LISTEN connection hears them.
        if (onCancel !== undefined) yield* register(localCancels, onCancel)
        const hearsCancels = (yes: boolean) => {
          if (onCancel === undefined) return
          if (yes) localCancels.delete(onCancel)
          else localCancels.add(onCancel)
        }
        if (listens) yield* Effect.forkScoped(remote.run(signal.notify, onCancel, remote.cancels ? hearsCancels : () => {}))
        return { notify: signal.notify, wait: (ms: number) => signal.wait(ms), pending: signal.pending }
      }),
    enqueued: Effect.suspend(() =>
      signals.size === 0 ? Effect.void : afterCommit(() => {
        for (const notify of signals) notify()
      })
    ),
    cancelled: (ids) =>
      Effect.suspend(() =>
        localCancels.size === 0 || ids.length === 0 ? Effect.void : afterCommit(() => {
          for (const onCancel of localCancels) onCancel(ids)
        })
      )
  }
}

// LISTEN until the connection is lost, then again after a second, for ever;
// or, when the connection does not hear the pool's notifications, never
// again (one warning per queue). A pool with a cancel callback listens on the
// cancel channel too. The channels are the schema's own (pgSchema.ts):
// pools of two schemas in one database do not wake each other.
const listening = (
  config: PgClient.PgClientConfig,
  schema: PgSchema.PgSchema,
  probe: Probe,
  listenDatabase: string | undefined
): Remote => {
  let warned = false
  const deaf = (error: NotHeard) =>
    Effect.suspend(() => {
      if (warned) return Effect.void
      warned = true
      return Effect.logWarning(notHeardWarning(listenDatabase, error.waitedMs))
    })
  return {
    cancels: true,
    run: (notify, onCancel, hearsCancels) =>
      listen(
        config,
        onCancel === undefined ? [schema.itemsChannel] : [schema.itemsChannel, schema.cancelChannel],
        probe,
        () => {
          hearsCancels(true)
          notify()
        },
        (channel, payload) => (channel === schema.cancelChannel ? onCancel?.(parseCancelIds(payload)) : notify())
      ).pipe(
        Effect.tapError(() => Effect.sync(() => hearsCancels(false))),
        Effect.catchAll((error) =>
          error instanceof NotHeard
            ? Effect.zipRight(deaf(error), Effect.never)
            : Effect.logWarning(`docket: ${error.message}; listening again in 1 s`)
        ),
        Effect.zipRight(Effect.sleep("1 second")),
        Effect.forever
      )
  }
}

// The one warning of a queue whose LISTEN connection does not hear the pool's notifications.
const notHeardWarning = (listenDatabase: string | undefined, waitedMs: number) => {
  const probe = `a notification sent through the pool did not reach the LISTEN connection within ${
    Math.round(waitedMs / 100) / 10
  } s`
  const off = "so LISTEN is off: items enqueued by other processes start at the next poll, " +
    "and their cancels stop a run at its next lease renewal"
  return listenDatabase === undefined
    ? `docket: ${probe} (is the database URL a transaction-pooling PgBouncer? It hands the listening session ` +
      `to other clients between transactions), ${off}. For wake-ups at once, give the LISTEN connection a direct ` +
      `or session-pooled URL of the same database: listenDatabase in Database.Options (docket worker ` +
      `--listen-database, DOCKET_LISTEN_DATABASE_URL); or set listen: false to poll without this warning`
    : `docket: ${probe} on listenDatabase (${describeTarget({ _tag: "Pg", url: listenDatabase })}), ${off}. ` +
      `listenDatabase must reach the same database as the pool, directly or through a session-pooled PgBouncer`
}

// A watch of the file shared by the queue's pools; cancels in other processes
// are not heard (a running item's holder learns of it at its next renewal).
const watching = (watch: SqliteWatch.Watch): Remote => ({
  cancels: false,
  run: (notify) => Effect.scoped(Effect.zipRight(watch.subscribe(notify), Effect.never))
})

/**
 * The service for the `SqlClient` in context: on PostgreSQL (with a PgClient,
 * whose connection settings the LISTEN connections use) signals listen; on a
 * SQLite file they watch it; on an in-memory SQLite database only this
 * process's enqueues wake its pools. A function, so each
 * call is a layer of its own: Effect builds a layer value once per layer
 * graph, and two queues on two databases must not share one (`Layer.fresh`
 * would not do: a layer used twice inside `provideMerge` would then be built
 * twice, and the repository and its pools would get two different ones).
 */
export const layer = (): Layer.Layer<Wakeups, never, SqlClient.SqlClient> =>
  Layer.effect(
    Wakeups,
    Effect.map(remoteTarget, (target) => {
      switch (target._tag) {
        case "Pg":
          return make(listening(target.config, target.schema, target.probe, target.listenDatabase))
        case "Sqlite":
          return make(watching(SqliteWatch.make(target.filename)))
        case "None":
          return make()
      }
    })
  )
