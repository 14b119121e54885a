/**
 * Client-side statement counting in a worker process: every statement the
 * process sends, grouped by its text. pg_stat_statements is not loaded on this
 * server (it needs shared_preload_libraries and a restart), so statements are
 * counted where they are sent: `pg.Client.prototype.query` (every pg-based
 * library here sends through it) and better-sqlite3's statement methods.
 */
import { createRequire } from "node:module"
import { join } from "node:path"

export interface StatementStats {
  count: number
  /** Sum of the time from sending to the result (pg: including waiting for the connection's turn). */
  totalMs: number
}

export interface StatementCounts {
  total: number
  readonly byText: Map<string, StatementStats>
}

export const counts: StatementCounts = { total: 0, byText: new Map() }

export const statementKey = (text: unknown): string => {
  if (typeof text !== "string") return "(other)"
  return text.replace(/\s+/g, " ").trim().slice(0, 90)
}

const record = (text: unknown): StatementStats => {
  counts.total++
  const k = statementKey(text)
  let stats = counts.byText.get(k)
  if (stats === undefined) {
    stats = { count: 0, totalMs: 0 }
    counts.byText.set(k, stats)
  }
  stats.count++
  return stats
}

const patched = new WeakSet<object>()

/** Counts statements of the `pg` module that `fromDir` resolves (each install has its own). */
export const countPg = (fromDir: string): boolean => {
  let pg: { Client: { prototype: { query: (...args: Array<unknown>) => unknown } } }
  try {
    pg = createRequire(join(fromDir, "package.json"))("pg")
  } catch {
    return false
  }
  const proto = pg.Client.prototype
  if (patched.has(proto)) return true
  patched.add(proto)
  const original = proto.query
  proto.query = function(this: unknown, ...args: Array<unknown>) {
    const first = args[0]
    const stats = record(typeof first === "string" ? first : (first as { text?: unknown } | null)?.text)
    const t0 = performance.now()
    const done = () => {
      stats.totalMs += performance.now() - t0
    }
    const last = args.length - 1
    if (typeof args[last] === "function") {
      const callback = args[last] as (...a: Array<unknown>) => unknown
      args[last] = function(this: unknown, ...a: Array<unknown>) {
        done()
        return callback.apply(this, a)
      }
      return original.apply(this, args)
    }
    const result = original.apply(this, args)
    if (result !== null && typeof result === "object" && typeof (result as Promise<unknown>).then === "function") {
      ;(result as Promise<unknown>).then(done, done)
    }
    return result
  }
  return true
}

/** Counts statements run through better-sqlite3 (all, get, run, iterate). */
export const countSqlite = (fromDir: string): boolean => {
  let Database: new(file: string) => { prepare: (sql: string) => object; close: () => void }
  try {
    Database = createRequire(join(fromDir, "package.json"))("better-sqlite3")
  } catch {
    return false
  }
  const db = new Database(":memory:")
  const proto = Object.getPrototypeOf(db.prepare("select 1")) as Record<string, (...args: Array<unknown>) => unknown>
  db.close()
  if (patched.has(proto)) return true
  patched.add(proto)
  for (const method of ["all", "get", "run", "iterate"]) {
    const original = proto[method]
    proto[method] = function(this: { source: string }, ...args: Array<unknown>) {
      const stats = record(this.source)
      const t0 = performance.now()
      try {
        return original.apply(this, args)
      } finally {
        stats.totalMs += performance.now() - t0
      }
    }
  }
  return true
}

/** Peak resident set size of this process so far (VmHWM), in kB. */
export const peakRssKb = async (): Promise<number> => {
  const { readFile } = await import("node:fs/promises")
  try {
    const status = await readFile("/proc/self/status", "utf8")
    return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN)
  } catch {
    return Math.round(process.memoryUsage().rss / 1024)
  }
}
