/**
 * The control scenarios' arithmetic over runs (test/reliability/control.ts):
 * reading the runs the task recorded (fixtures/reliability/control/_record.mts),
 * how many ran at once (a sweep over the runs' ends), and the most starts in
 * any window of a period.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

/** One run of an item, as its handler recorded it (this machine's clock, but `claimedAt`). */
export interface Run {
  readonly item: number
  readonly kind: string
  readonly n: number
  readonly attempt: number
  readonly pid: number
  /** When the claim took the item, on the database's clock (Job.claimedAt). */
  readonly claimedAt: number
  /** When the handler started (Date.now() in the worker process). */
  readonly start: number
  /** Just before the handler returned; null if it never did (its process was killed). */
  readonly end: number | null
}

interface Line {
  readonly event: "start" | "end"
  readonly item: number
  readonly kind: string
  readonly n: number
  readonly attempt: number
  readonly pid: number
  readonly at: number
  readonly claimedAt?: number
}

/** Every run recorded in `dir` (a file per worker process), in start order. */
export const readRuns = (dir: string): Array<Run> => {
  const runs = new Map<string, { -readonly [K in keyof Run]: Run[K] }>()
  const ends = new Map<string, number>()
  for (const name of readdirSync(dir).filter((n) => n.startsWith("run-"))) {
    for (const text of readFileSync(join(dir, name), "utf8").split("\n")) {
      if (text.trim() === "") continue
      // A process killed in the middle of a write leaves half a line: not a run.
      let line: Line
      try {
        line = JSON.parse(text) as Line
      } catch {
        continue
      }
      const key = `${line.pid} ${line.item} ${line.attempt}`
      if (line.event === "end") {
        ends.set(key, line.at)
        continue
      }
      const { attempt, item, kind, n, pid } = line
      runs.set(key, { item, kind, n, attempt, pid, claimedAt: line.claimedAt ?? Number.NaN, start: line.at, end: null })
    }
  }
  for (const [key, end] of ends) {
    const run = runs.get(key)
    if (run !== undefined) run.end = end
  }
  return [...runs.values()].sort((a, b) => a.start - b.start)
}

/** The items of which some run returned. */
export const finishedItems = (runs: ReadonlyArray<Run>): Set<number> =>
  new Set(runs.filter((r) => r.end !== null).map((r) => r.item))

/** A time span [start, end): a run, from its handler's start to its end (or its process's kill). */
export interface Span {
  readonly start: number
  readonly end: number
}

/** How many spans hold each instant: steps `{ at, running }`, each valid until the next step. */
export type Profile = ReadonlyArray<{ readonly at: number; readonly running: number }>

/**
 * The sweep over the spans' ends. Spans are half-open: at an instant where one
 * ends and another starts, the ending one is gone first (a run that ended at
 * t and a run that started at t were not both running).
 */
export const profile = (spans: ReadonlyArray<Span>): Profile => {
  const events = spans.flatMap((s) => [[s.start, 1], [Math.max(s.start, s.end), -1]] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
  const steps: Array<{ at: number; running: number }> = []
  let running = 0
  for (const [at, change] of events) {
    running += change
    const last = steps[steps.length - 1]
    if (last !== undefined && last.at === at) last.running = running
    else steps.push({ at, running })
  }
  return steps
}

/** The most spans running at once at any instant in [from, to). */
export const maxRunning = (steps: Profile, from = -Infinity, to = Infinity): number => {
  let most = 0
  for (let i = 0; i < steps.length; i++) {
    const until = i + 1 < steps.length ? steps[i + 1].at : Infinity
    if (steps[i].at < to && until > from) most = Math.max(most, steps[i].running)
  }
  return most
}

/** The first instant at or after `from` at which more than `above` spans run, if any. */
export const firstAbove = (steps: Profile, above: number, from: number): number | undefined => {
  for (let i = 0; i < steps.length; i++) {
    const until = i + 1 < steps.length ? steps[i + 1].at : Infinity
    if (until > from && steps[i].running > above) return Math.max(from, steps[i].at)
  }
  return undefined
}

/**
 * The most times in any window [t, t + periodMs): the windows starting at a
 * time are enough (a window holding the most can be slid right to its first).
 */
export const maxInWindow = (times: ReadonlyArray<number>, periodMs: number): number => {
  const sorted = [...times].sort((a, b) => a - b)
  let most = 0
  let j = 0
  for (let i = 0; i < sorted.length; i++) {
    if (j < i) j = i
    while (j < sorted.length && sorted[j] < sorted[i] + periodMs) j++
    most = Math.max(most, j - i)
  }
  return most
}
