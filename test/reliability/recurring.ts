/**
 * Recurring items across processes (issue 17), on PostgreSQL and on one
 * SQLite file: three real `docket worker` processes declare the same
 * every-second schedule (fixtures/reliability/recurring/rel.tick.mts) for
 * about 15 s; one is SIGKILLed mid-way and started again. The task records
 * every run in a file of its own, and the verdict comes from those records:
 *
 * - every second of the span (from the first whole second after all three
 *   were up to the last whole second before the end) has a run: no tick lost;
 * - every tick, in the span or not, has exactly one item (runs of one tick
 *   with two item ids would be a doubled tick; the dedupe key cannot hide one
 *   that was enqueued after the first had started);
 * - a tick's first attempt ran with runAt = the tick.
 *
 * A tick may run twice as one item (same id, a later attempt) only if the
 * killed process was running it: that is the queue's at-least-once, not a
 * doubled tick, and is counted apart.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { docket } from "../cli.support.js"
import { freshDir, freshPgDatabase, pgAvailable } from "../support/db.js"
import { delay, fixture, killWorker, report, startWorker, stopWorker, waitFor, type WorkerProcess } from "./support.js"

interface RunRecord {
  readonly item: number
  readonly key: string
  readonly runAt: number
  readonly attempt: number
  readonly pid: number
}

const SPAN_MS = 15_000
const KILL_AFTER_MS = 5_000

const readRecords = (dir: string): Array<RunRecord> =>
  readdirSync(dir).filter((f) => f.endsWith(".jsonl")).flatMap((f) =>
    readFileSync(join(dir, f), "utf8").split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as RunRecord))

const tickOfKey = (key: string) => Date.parse(key.slice(key.lastIndexOf("@") + 1))

/** Runs the three processes on `url` and returns the records and the span. */
const drive = async (url: string, logDir: string) => {
  const migrated = await docket(["migrate", "--database", url])
  expect(migrated.code, migrated.stderr).toBe(0)
  const spawnOne = () =>
    startWorker({
      database: url,
      tasks: fixture("recurring"),
      args: ["--poll", "200ms", "--lease", "2s", "--grace", "1s", "--concurrency", "4"],
      env: { RECURRING_LOG_DIR: logDir }
    })
  const workers: Array<WorkerProcess> = [spawnOne(), spawnOne(), spawnOne()]
  try {
    await Promise.all(workers.map((w) => w.ready(60_000)))
    const spanStart = Math.ceil(Date.now() / 1000) * 1000 + 1000
    await delay(Math.max(0, spanStart + KILL_AFTER_MS - Date.now()))
    const victim = workers[1]
    await killWorker(victim)
    const killedAt = Date.now()
    workers.push(spawnOne())
    await workers[3].ready(60_000)
    const restartedAt = Date.now()
    await delay(Math.max(0, spanStart + SPAN_MS - Date.now()))
    const spanEnd = Math.floor(Date.now() / 1000) * 1000 - 1000
    const seconds = Array.from({ length: (spanEnd - spanStart) / 1000 + 1 }, (_, i) => spanStart + i * 1000)
    await waitFor("a run of every tick in the span", () => {
      const ran = new Set(readRecords(logDir).map((r) => tickOfKey(r.key)))
      return seconds.every((s) => ran.has(s))
    }, 30_000).catch(() => undefined) // judged below, tick by tick
    return { seconds, killedAt, restartedAt, records: readRecords(logDir), spanStart, spanEnd }
  } finally {
    for (const w of workers) await stopWorker(w)
  }
}

const scenario = (dialect: "sqlite" | "pg") => async () => {
  const logs = freshDir()
  const db = dialect === "pg" ? await freshPgDatabase() : undefined
  const sqliteDir = dialect === "sqlite" ? freshDir() : undefined
  try {
    const url = db?.url ?? join(sqliteDir!.dir, "queue.db")
    const run = await drive(url, logs.dir)
    const byTick = new Map<number, Array<RunRecord>>()
    for (const r of run.records) {
      const tick = tickOfKey(r.key)
      byTick.set(tick, [...(byTick.get(tick) ?? []), r])
    }
    const lost = run.seconds.filter((s) => !byTick.has(s))
    const doubled = [...byTick].filter(([, rs]) => new Set(rs.map((r) => r.item)).size > 1).map(([t]) => t)
    const offTick = run.records.filter((r) => r.attempt === 1 && r.runAt !== tickOfKey(r.key))
    const rerun = [...byTick.values()].filter((rs) => rs.length > 1 && new Set(rs.map((r) => r.item)).size === 1).length
    const inSpan = run.seconds.filter((s) => byTick.has(s)).length
    report(`recurring (${dialect})`, {
      processes: 3,
      killed: 1,
      spanSeconds: run.seconds.length,
      ticksInSpanWithOneItem: run.seconds.filter((s) => new Set(byTick.get(s)?.map((r) => r.item)).size === 1).length,
      ticksInSpanRun: inSpan,
      lost: lost.length,
      doubled: doubled.length,
      ticksRunTwiceAsOneItem: rerun,
      ticksAll: byTick.size,
      runs: run.records.length,
      runsByPid: [...new Set(run.records.map((r) => r.pid))].map((pid) => run.records.filter((r) => r.pid === pid).length).join("/")
    })
    expect(lost.map((t) => new Date(t).toISOString())).toEqual([])
    expect(doubled.map((t) => new Date(t).toISOString())).toEqual([])
    expect(offTick).toEqual([])
    for (const s of run.seconds) expect(new Set(byTick.get(s)!.map((r) => r.item)).size).toBe(1)
    // Every run is a whole-second tick of this schedule.
    for (const r of run.records) {
      expect(r.key).toMatch(/^rel\.tick@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/)
    }
    expect(run.seconds.length).toBeGreaterThanOrEqual(12)
  } finally {
    logs.remove()
    sqliteDir?.remove()
    await db?.drop()
  }
}

export const recurringScenario = () =>
  describe("recurring: 3 processes tick an every-second schedule, one SIGKILLed and restarted", () => {
    it("SQLite: every tick of the span enqueued once and run", { timeout: 180_000 }, scenario("sqlite"))
    it.skipIf(!pgAvailable)("PostgreSQL: every tick of the span enqueued once and run", { timeout: 180_000 }, scenario("pg"))
  })
