/**
 * Wakes a SQLite queue's pools when another process (or another connection
 * of this one) commits to the file: `fs.watch` on the file's directory
 * (inotify on Linux), for events on the database file or its `-wal` file. A
 * commit in WAL mode (the default) writes the `-wal` file; with the rollback
 * journal, the database file. The event is only a hint, as a notification is
 * on PostgreSQL: the pool claims, and finds what is there.
 *
 * Measured against the other options (bench/sqlite-wakeup.ts,
 * docs/benchmarks.md "SQLite: wake-ups across processes", medians on the
 * shared 2-core machine): polling `PRAGMA data_version` on a dedicated
 * connection picks up an item in 10.6 / 14.6 ms p50 at 10 / 20 ms, but its
 * timer costs an idle worker 1.78 / 1.15 % of a core (the worker alone:
 * 0.44 %), over the 1 % budget; through the pool's own SqlClient (which would
 * ignore this process's commits) 7 % at 10 ms; `fs.watchFile` (stat() on
 * libuv's thread pool) 1.40 % at 10 ms. `fs.watch` costs nothing while
 * nothing is written (0.30 %) and picks up in 2.8 ms p50.
 *
 * This process's own commits (its pools completing items, heartbeats) are
 * events too, and wake its pools for nothing: measured, they are no storm
 * (a finished item already wakes the claimer when its buffer runs low, and an
 * empty claim writes nothing, so it sets off no event of its own).
 *
 * One directory watch per queue, shared by its pools: opened for the first
 * subscriber, closed with the last. A watch that cannot be opened or fails
 * later is logged once; the pools then find other processes' items by their
 * poll, as before. Where the file system reports no events for other
 * processes' writes (network file systems, which SQLite does not support
 * across hosts anyway), likewise.
 */
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { type FSWatcher, realpathSync, watch } from "node:fs"
import { basename, dirname, resolve } from "node:path"

/** One queue's watch. */
export interface Watch {
  /** Calls `notify` on every commit seen, until the scope closes. */
  readonly subscribe: (notify: () => void) => Effect.Effect<void, never, Scope.Scope>
  /** Whether the directory is being watched now (tests). */
  readonly active: () => boolean
}

/** Whether a SQLite filename is a file other processes can open (not `:memory:` nor a temporary database). */
export const watchable = (filename: string): boolean =>
  filename !== "" && filename !== ":memory:" && !/^file::memory:/i.test(filename) && !/mode=memory/i.test(filename)

// The file's real path: SQLite follows a symbolic link to the database, and
// writes its -wal file beside the target.
const realPath = (filename: string) => {
  try {
    return realpathSync(filename)
  } catch {
    return resolve(filename)
  }
}

/** The watch of the SQLite file `filename` (relative to the working directory now). */
export const make = (filename: string, open: typeof watch = watch): Watch => {
  const path = realPath(filename)
  const dir = dirname(path)
  const names = new Set([basename(path), `${basename(path)}-wal`])
  const subscribers = new Set<() => void>()
  let watcher: FSWatcher | undefined
  let failed = false

  const wake = () => {
    for (const notify of subscribers) notify()
  }
  const close = () => {
    const w = watcher
    watcher = undefined
    w?.close()
  }
  // Once: the pools keep their poll, which finds the items all the same.
  // Logged with the services of the subscriber that opened the watch.
  const warning = (error: unknown) =>
    Effect.logWarning(
      `docket: cannot watch ${dir} for commits of other processes (${error instanceof Error ? error.message : String(error)}); ` +
        "their items are picked up by the poll"
    )
  const start = Effect.flatMap(Effect.runtime<never>(), (runtime) =>
    Effect.suspend(() => {
      if (watcher !== undefined || failed) return Effect.void
      try {
        const w = open(dir, { persistent: false }, (_event, name) => {
          // Some platforms do not say which file changed.
          if (name === null || names.has(String(name))) wake()
        })
        w.on("error", (error) => {
          if (watcher !== w) return
          failed = true
          close()
          Runtime.runFork(runtime)(warning(error))
        })
        watcher = w
        return Effect.void
      } catch (error) {
        failed = true
        return warning(error)
      }
    }))

  return {
    subscribe: (notify) =>
      Effect.acquireRelease(
        Effect.zipRight(Effect.sync(() => subscribers.add(notify)), start),
        () =>
          Effect.sync(() => {
            subscribers.delete(notify)
            if (subscribers.size === 0) close()
          })
      ),
    active: () => watcher !== undefined
  }
}
