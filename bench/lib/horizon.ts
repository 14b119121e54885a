/**
 * W9 (issue 35): one contender's worker draining rounds of no-op items, one
 * round after another in one database, with or without another session that
 * holds the vacuum horizon back (a REPEATABLE READ transaction that has read
 * a table, so it keeps its snapshot and its backend_xmin until it ends).
 *
 * While such a snapshot is open, no row version deleted or replaced after it
 * began can be removed: not by autovacuum, not by the pruning a page gets
 * when it is read, and index entries pointing at them cannot be marked dead.
 * A queue whose claim walks an index over its finished rows pays for every
 * one of them, so each round costs more than the one before.
 *
 * The worker is the contender's library worker in a worker process of the
 * harness (bench/lib/child.ts), as W2 runs it, concurrency 10; it runs from
 * before round 1 to the end. The enqueue is the adapter's bulk path, from
 * this process.
 */
import { loadavg } from "node:os"
import pg from "pg"
import { load, type Name } from "../adapters/registry.js"
import type { Client, Payload, Probe } from "../adapters/types.js"
import { checkOnce, type OnceCheck } from "./harness.js"
import { now } from "./protocol.js"
import { dropTarget, type Env, freshTarget } from "./stores.js"
import { PROJECT_DIR, WorkerGroup } from "./workers.js"

export interface HorizonContender {
  /** Its name on the command line and in the table. */
  readonly name: string
  /** The adapter of bench/adapters that runs it (its configuration is that adapter's). */
  readonly adapter: Name
  /** The queue's table(s), schema-qualified; their partitions count too (pg-boss's `job`). */
  readonly queueTables: ReadonlyArray<string>
}

export const CONTENDERS: ReadonlyArray<HorizonContender> = [
  { name: "docket", adapter: "docket-pg", queueTables: ["public.docket_items"] },
  { name: "graphile-worker", adapter: "graphile-worker-lq", queueTables: ["graphile_worker._private_jobs"] },
  { name: "pg-boss", adapter: "pg-boss", queueTables: ["pgboss.job"] },
  { name: "pg-boss-fast", adapter: "pg-boss-fast", queueTables: ["pgboss.job"] }
]

/** The queue table's statistics (pg_stat_user_tables; a backend reports its counts up to a second late). */
export interface TableStats {
  readonly liveTup: number
  readonly deadTup: number
  readonly autovacuums: number
  /** Heap, indexes and TOAST. */
  readonly bytes: number
}

export interface Round {
  readonly enqueueMs: number
  /** The round's first handler start, from the enqueue's end (negative: during the enqueue). */
  readonly firstStartMs: number
  /** Handlers finished when the enqueue returned. */
  readonly doneDuringEnqueue: number
  /** From the enqueue's end (or the round's first start, if later) to the store seen empty. */
  readonly drainMs: number
  /** From the enqueue's start to the store seen empty. */
  readonly totalMs: number
  /** Age in transactions of the oldest backend_xmin in the database (the reader's own left out). */
  readonly horizonAge: number
  readonly table: TableStats
}

export interface HorizonRun {
  readonly contender: string
  readonly adapter: Name
  readonly held: boolean
  readonly jobs: number
  readonly startedAt: string
  readonly rounds: ReadonlyArray<Round>
  /** After the worker stopped (its backends gone, their counts reported). */
  readonly end?: TableStats | undefined
  /** Then, dead row versions left in the table(s), by pgstattuple (undefined without the extension). */
  readonly deadLeft?: number | undefined
  /** The holding session: its backend_xmin, transactions since, and whether it still held at the end. */
  readonly holder?: { readonly xmin: string; readonly age: number; readonly stillHeld: boolean } | undefined
  readonly once?: OnceCheck | undefined
  readonly error?: string | undefined
  readonly loadAverage: { readonly start: ReadonlyArray<number>; readonly end: ReadonlyArray<number> }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const connect = async (url: string, name: string): Promise<pg.Client> => {
  const client = new pg.Client({ connectionString: url, application_name: name })
  // DROP DATABASE ... WITH (FORCE) ends it; that must not end this process.
  client.on("error", () => {})
  await client.connect()
  return client
}

const TABLE_STATS = `select coalesce(sum(s.n_live_tup), 0)::bigint as live, coalesce(sum(s.n_dead_tup), 0)::bigint as dead,
    coalesce(sum(s.autovacuum_count), 0)::bigint as autovacuums, coalesce(sum(pg_total_relation_size(s.relid)), 0)::bigint as bytes
  from pg_stat_user_tables s
  where s.relid = any($1::regclass[])
     or s.relid in (select inhrelid from pg_inherits where inhparent = any($1::regclass[]))`

const tableStats = async (reader: pg.Client, tables: ReadonlyArray<string>): Promise<TableStats> => {
  const row = (await reader.query(TABLE_STATS, [tables])).rows[0]
  return { liveTup: Number(row.live), deadTup: Number(row.dead), autovacuums: Number(row.autovacuums), bytes: Number(row.bytes) }
}

/**
 * Dead row versions actually left in the queue table(s), counted by
 * pgstattuple (a full scan, after the timings; its scan first prunes what the
 * horizon lets it, so this is what could not be removed). Undefined where the
 * extension is not installed.
 */
const deadLeft = async (reader: pg.Client, tables: ReadonlyArray<string>): Promise<number | undefined> => {
  try {
    await reader.query("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    const { rows } = await reader.query(
      `select coalesce(sum((pgstattuple(c.oid)).dead_tuple_count), 0)::bigint as dead from pg_class c
       where c.relkind = 'r' and (c.oid = any($1::regclass[])
         or c.oid in (select inhrelid from pg_inherits where inhparent = any($1::regclass[])))`,
      [tables]
    )
    return Number(rows[0].dead)
  } catch {
    return undefined
  }
}

const horizonAge = async (reader: pg.Client): Promise<number> =>
  Number(
    (await reader.query(
      `select coalesce(max(age(backend_xmin)), 0) as age from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid()`
    )).rows[0].age
  )

/**
 * The session that holds the horizon: a table of its own, read in a
 * REPEATABLE READ transaction left open. Checked in pg_stat_activity: its
 * backend_xmin must be set, or it holds nothing.
 */
const hold = async (url: string, reader: pg.Client) => {
  const client = await connect(url, "w9-holder")
  await client.query("SET idle_in_transaction_session_timeout = 0")
  await client.query("CREATE TABLE w9_hold (x int); INSERT INTO w9_hold VALUES (1)")
  await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ")
  await client.query("SELECT 1 FROM w9_hold")
  const pid = Number((await client.query("select pg_backend_pid() as pid")).rows[0].pid)
  const xminOf = async () => {
    const { rows } = await reader.query(
      "select backend_xmin::text as xmin, age(backend_xmin) as age from pg_stat_activity where pid = $1",
      [pid]
    )
    return { xmin: rows[0]?.xmin as string | null | undefined, age: Number(rows[0]?.age ?? 0) }
  }
  const { xmin } = await xminOf()
  if (xmin === null || xmin === undefined) throw new Error("the holding session has no backend_xmin: it holds nothing back")
  return {
    xmin,
    /** Whether it still holds the same xmin, and how many transactions began since. */
    check: async () => {
      const now = await xminOf()
      return { xmin, age: now.age, stillHeld: now.xmin === xmin }
    },
    end: async () => {
      await client.query("ROLLBACK").catch(() => {})
      await client.end().catch(() => {})
    }
  }
}

/** Polls `probe` every 5 ms until nothing is pending; returns when it saw that. */
const waitEmpty = async (probe: Probe, timeoutMs: number): Promise<number> => {
  const until = now() + timeoutMs
  for (;;) {
    const pending = await probe.pending()
    const at = now()
    if (pending === 0) return at
    if (at > until) throw new Error(`still ${pending} pending after ${timeoutMs / 1000} s`)
    await sleep(5)
  }
}

/** Waits until the database has no client backend but the reader and the holder (so their counts are reported). */
const waitWorkersGone = async (reader: pg.Client, timeoutMs = 15_000) => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    const { rows } = await reader.query(
      `select count(*)::int as n from pg_stat_activity where datname = current_database()
       and backend_type = 'client backend' and pid <> pg_backend_pid() and application_name <> 'w9-holder'`
    )
    if (rows[0].n === 0) return
    await sleep(50)
  }
}

interface RoundContext {
  readonly group: WorkerGroup
  readonly client: Client
  readonly probe: Probe
  readonly reader: pg.Client
  readonly contender: HorizonContender
  /** From 0; its items' payload indexes follow the rounds before it. */
  readonly round: number
  readonly jobs: number
  readonly timeoutMs: number
}

/** One round: `jobs` items enqueued in bulk, timed until the store is seen empty. */
const runRound = async (x: RoundContext): Promise<Round> => {
  const before = x.round * x.jobs
  let firstStart: number | undefined
  const started = x.group.waitFor(() => x.group.done > before, x.timeoutMs, `round ${x.round + 1}'s first item`)
    .then(() => void (firstStart = now()))
  started.catch(() => {})
  const t = now()
  const payloads: Array<Payload> = Array.from({ length: x.jobs }, (_, k) => ({ i: before + k, t }))
  const t0 = now()
  await x.client.enqueueBulk(payloads)
  const t1 = now()
  const doneDuringEnqueue = x.group.done - before
  await x.group.waitDone(before + x.jobs, x.timeoutMs)
  await started
  const end = await waitEmpty(x.probe, x.timeoutMs)
  return {
    enqueueMs: t1 - t0,
    firstStartMs: (firstStart ?? t1) - t1,
    doneDuringEnqueue,
    drainMs: end - Math.max(t1, firstStart ?? t1),
    totalMs: end - t0,
    horizonAge: await horizonAge(x.reader),
    table: await tableStats(x.reader, x.contender.queueTables)
  }
}

export interface HorizonOptions {
  readonly env: Env
  readonly rounds: number
  readonly jobs: number
  readonly concurrency: number
  readonly log: (line: string) => void
}

/** One contender, one condition: a fresh database, the worker, `rounds` rounds of `jobs` items. */
export const runHorizon = async (c: HorizonContender, held: boolean, options: HorizonOptions): Promise<HorizonRun> => {
  const { rounds, jobs } = options
  const startedAt = new Date().toISOString()
  const loadStart = loadavg()
  const out: Array<Round> = []
  const base = { contender: c.name, adapter: c.adapter, held, jobs, startedAt }
  const adapter = await load(c.adapter)
  const target = await freshTarget(options.env, "pg", `${c.name}_${held ? "held" : "free"}`, "w9")
  if (target.store !== "pg") throw new Error("W9 runs on PostgreSQL")
  const closers: Array<() => Promise<unknown>> = []
  // Each closes once: the enqueuer and the probe before the end's statistics, the rest in `finally`.
  const closer = (close: () => Promise<unknown>) => {
    let closing: Promise<unknown> | undefined
    const once = () => (closing ??= close())
    closers.push(once)
    return once
  }
  let group: WorkerGroup | undefined
  try {
    const client = await adapter.open(target, "plain")
    const closeClient = closer(() => client.close())
    const reader = await connect(target.url, "w9-reader")
    closer(() => reader.end())
    group = await WorkerGroup.start(1, {
      contender: c.adapter,
      target,
      concurrency: options.concurrency,
      mode: "plain",
      expect: rounds * jobs,
      recordStarts: false,
      projectDir: PROJECT_DIR
    })
    await group.go()
    const holder = held ? await hold(target.url, reader) : undefined
    if (holder !== undefined) closer(holder.end)
    const probe = await adapter.probe(target)
    const closeProbe = closer(() => probe.close())
    const timeoutMs = 60_000 + jobs * 12
    for (let r = 0; r < rounds; r++) {
      const round = await runRound({ group, client, probe, reader, contender: c, round: r, jobs, timeoutMs })
      out.push(round)
      options.log(
        `${c.name} ${held ? "held" : "not held"} round ${r + 1}: drain ${Math.round(round.drainMs)} ms ` +
          `(enqueue ${Math.round(round.enqueueMs)} ms, total ${Math.round(round.totalMs)} ms), ` +
          `dead tuples ~${round.table.deadTup.toLocaleString("en-US")}, horizon age ${round.horizonAge}`
      )
    }
    const holderState = await holder?.check()
    await closeClient()
    await closeProbe()
    const results = await group.stop()
    group = undefined
    await waitWorkersGone(reader)
    const endStats = await tableStats(reader, c.queueTables)
    return {
      ...base,
      rounds: out,
      end: endStats,
      deadLeft: await deadLeft(reader, c.queueTables),
      holder: holderState,
      once: checkOnce(rounds * jobs, results),
      loadAverage: { start: loadStart, end: loadavg() }
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    return { ...base, rounds: out, error: message, loadAverage: { start: loadStart, end: loadavg() } }
  } finally {
    group?.kill()
    for (const close of closers.reverse()) await close().catch(() => {})
    await dropTarget(options.env, target)
  }
}
