/**
 * What the kill scenarios on both dialects share: the scenario's database,
 * read the same way on PostgreSQL and on a SQLite file shared by the
 * processes (`scenarioStore`), and a crew of worker processes of which a
 * random one is SIGKILLed and replaced every second until the work is done
 * (`Crew.killEverySecondUntil`).
 */
import Sqlite from "better-sqlite3"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freshPgDatabase } from "../support/db.js"
import { delay, killWorker, pgPool, startWorker, stopWorker, type WorkerOptions, type WorkerProcess } from "./support.js"

/** The scenario's database: its URL, rows read with `?1`-style parameters on both dialects. */
export interface Store {
  readonly url: string
  readonly rows: <A>(text: string, params?: ReadonlyArray<unknown>) => Promise<Array<A>>
  /** A statement that changes the schema or rows (SQLite: on a connection of its own, closed after). */
  readonly exec: (text: string) => Promise<void>
  readonly close: () => Promise<void>
}

const pgStore = async (): Promise<Store> => {
  const db = await freshPgDatabase()
  const pool = pgPool(db.url)
  return {
    url: db.url,
    rows: async <A>(text: string, params: ReadonlyArray<unknown> = []) =>
      (await pool.query(text.replace(/\?(\d)/g, "$$$1"), [...params])).rows as Array<A>,
    exec: async (text) => {
      await pool.query(text)
    },
    close: async () => {
      await pool.end()
      await db.drop()
    }
  }
}

const sqliteStore = async (name: string): Promise<Store> => {
  const dir = mkdtempSync(join(tmpdir(), `docket-${name}-`))
  const url = join(dir, `${name}.db`)
  let db: Sqlite.Database | undefined
  return {
    url,
    rows: async <A>(text: string, params: ReadonlyArray<unknown> = []) => {
      db ??= new Sqlite(url, { readonly: true })
      return db.prepare(text.replace(/\?\d/g, "?")).all(...params) as Array<A>
    },
    exec: async (text) => {
      const writer = new Sqlite(url)
      try {
        writer.pragma("busy_timeout = 10000")
        writer.exec(text)
      } finally {
        writer.close()
      }
    },
    close: async () => {
      db?.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** A fresh database for a scenario: a PostgreSQL database, or a SQLite file in a directory of its own. */
export const scenarioStore = (dialect: "pg" | "sqlite", name: string): Promise<Store> =>
  dialect === "pg" ? pgStore() : sqliteStore(name)

/** `count(*) AS n` of a statement. */
export const countOf = async (store: Store, text: string, params: ReadonlyArray<unknown> = []) =>
  Number((await store.rows<{ n: number | string }>(text, params))[0].n)

/** Worker processes started alike, the live ones tracked, every one kept (to kill at the end). */
export class Crew {
  readonly live = new Set<WorkerProcess>()
  readonly every: Array<WorkerProcess> = []
  /** The pids of the processes SIGKILLed by `killEverySecondUntil`. */
  readonly killed = new Set<number>()
  kills = 0
  constructor(private readonly options: WorkerOptions) {}

  /** Starts one more worker process. */
  spawn(): WorkerProcess {
    const worker = startWorker(this.options)
    this.live.add(worker)
    this.every.push(worker)
    void worker.exited.then(() => this.live.delete(worker))
    return worker
  }

  /** Starts `n` and waits until each is ready. */
  async start(n: number): Promise<void> {
    await Promise.all(Array.from({ length: n }, () => this.spawn().ready(60_000)))
  }

  /**
   * Every second, while two or more are up, SIGKILLs a random live worker and
   * starts another, until `done()` (checked every 50 ms); fails past `withinMs`.
   */
  async killEverySecondUntil(what: string, done: () => Promise<boolean>, withinMs: number): Promise<void> {
    const deadline = performance.now() + withinMs
    let next = performance.now() + 1000
    while (!(await done())) {
      if (performance.now() > deadline) throw new Error(`${what}: not done within ${withinMs / 1000} s`)
      if (performance.now() >= next) {
        next += 1000
        const up = [...this.live].filter((w) => w.name !== undefined && w.alive())
        if (up.length >= 2) {
          const victim = up[Math.floor(Math.random() * up.length)]
          this.killed.add(victim.pid)
          this.kills++
          await killWorker(victim)
          this.spawn()
        }
      }
      await delay(50)
    }
  }

  /**
   * Stops the live workers gracefully (SIGTERM), each once it is ready (one
   * started by the last kill may still be loading): their exits.
   */
  async stopLive(): Promise<Array<{ code: number | null; signal: NodeJS.Signals | null }>> {
    const live = [...this.live]
    await Promise.all(live.map((w) => w.ready(60_000)))
    return Promise.all(live.map((w) => stopWorker(w)))
  }

  /** SIGKILLs every process ever started (the scenario's cleanup). */
  async killAll(): Promise<void> {
    for (const worker of this.every) await killWorker(worker)
  }
}
