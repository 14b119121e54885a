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
 *
 * Then the missed modes after real stops: every worker stopped, the schedule
 * awaited until `docket recurring list` shows it stopped (15 s without a
 * touch), and one worker started with `missed` set to skip, one, all in turn:
 * skip runs none of the ticks of the stop, one runs only the latest (the
 * last tick before its declaration), all runs each of them; every tick after
 * the restart runs, each with one item.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { docket } from "../support/cli.js"
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

const spawnWorker = (url: string, logDir: string, missed = "one") =>
  startWorker({
    database: url,
    tasks: fixture("recurring"),
    args: ["--poll", "200ms", "--lease", "2s", "--grace", "1s", "--concurrency", "4"],
    env: { RECURRING_LOG_DIR: logDir, RECURRING_MISSED: missed }
  })

const scheduleOf = async (url: string) => {
  const r = await docket(["recurring", "list", "--json", "--database", url])
  expect(r.code, r.stderr).toBe(0)
  return (JSON.parse(r.stdout) as Array<{ status: string; lastTick: number }>)[0]
}

/** The ticks that ran after `after`, in order, each once (a rerun of one item counted once). */
const ticksAfter = (records: ReadonlyArray<RunRecord>, after: number) =>
  [...new Set(records.map((r) => tickOfKey(r.key)).filter((t) => t > after))].sort((a, b) => a - b)

/**
 * A stop of every worker, then one worker with `missed` = mode; returns what
 * the mode is judged on: the last tick before the stop, when the restart
 * began and when it was up, and the ticks that ran after the stop.
 */
const missedPhase = async (url: string, logDir: string, mode: "skip" | "one" | "all") => {
  await waitFor("the schedule shown stopped", async () => (await scheduleOf(url)).status === "stopped", 40_000, 500)
  // The last tick enqueued before the stop, as stored: its item may not have run
  // yet (a graceful stop ends ticking before claiming), and runs after the restart.
  const lastBefore = (await scheduleOf(url)).lastTick
  const restartAt = Date.now()
  const worker = spawnWorker(url, logDir, mode)
  try {
    await worker.ready(60_000)
    const readyAt = Date.now()
    await waitFor("three ticks after the restart", () => ticksAfter(readRecords(logDir), readyAt).length >= 3, 30_000)
    await stopWorker(worker)
    // The phase's ticks end at its stop (a later phase's are judged there).
    return { mode, lastBefore, restartAt, readyAt, endAt: Date.now() }
  } finally {
    await stopWorker(worker)
  }
}

/** Judges a missed phase by the records (see the module doc); returns its figures. */
const judgeMissed = (phase: Awaited<ReturnType<typeof missedPhase>>, records: ReadonlyArray<RunRecord>) => {
  const { endAt, lastBefore, mode, readyAt, restartAt } = phase
  const ran = ticksAfter(records, lastBefore).filter((t) => t <= endAt)
  const first = ran[0]
  // From the first tick that ran after the stop, every second ran, once.
  expect(ran[ran.length - 1] - first, mode).toBe((ran.length - 1) * 1000)
  const stopped = (restartAt - lastBefore) / 1000
  if (mode === "all") {
    expect(first, mode).toBe(lastBefore + 1000)
  } else if (mode === "one") {
    // The latest tick at the declaration, which came after the restart began and before it was up.
    expect(first, mode).toBeGreaterThan(restartAt - 1000)
    expect(first, mode).toBeLessThanOrEqual(readyAt)
  } else {
    // None of the stop's ticks: the first is after the declaration.
    expect(first, mode).toBeGreaterThan(restartAt)
  }
  // The stop's length, and the ticks run from the stop until the restarted worker was up (skip 0, one 1, all each).
  return {
    [`${mode}.stopSeconds`]: Math.round(stopped),
    [`${mode}.ticksRunUntilUp`]: ran.filter((t) => t <= readyAt).length
  }
}

/** Runs the three processes on `url` and returns the records and the span. */
const drive = async (url: string, logDir: string) => {
  const migrated = await docket(["migrate", "--database", url])
  expect(migrated.code, migrated.stderr).toBe(0)
  const spawnOne = () => spawnWorker(url, logDir)
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
    const missed = []
    for (const mode of ["skip", "one", "all"] as const) missed.push(await missedPhase(url, logs.dir, mode))
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
    const all = readRecords(logs.dir)
    const missedFigures = missed.map((phase) => judgeMissed(phase, all))
    report(`recurring missed (${dialect})`, Object.assign({}, ...missedFigures))
    // No tick of any phase had two items.
    const items = new Map<number, Set<number>>()
    for (const r of all) items.set(tickOfKey(r.key), (items.get(tickOfKey(r.key)) ?? new Set()).add(r.item))
    expect([...items].filter(([, ids]) => ids.size > 1).map(([t]) => new Date(t).toISOString())).toEqual([])
  } finally {
    logs.remove()
    sqliteDir?.remove()
    await db?.drop()
  }
}

export const recurringScenario = () =>
  describe("recurring: 3 processes tick an every-second schedule, one SIGKILLed and restarted", () => {
    it("SQLite: every tick of the span enqueued once and run", { timeout: 300_000 }, scenario("sqlite"))
    it.skipIf(!pgAvailable)("PostgreSQL: every tick of the span enqueued once and run", { timeout: 300_000 }, scenario("pg"))
  })
