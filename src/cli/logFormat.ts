/**
 * What `docket worker` writes when its stdout is not a terminal (systemd,
 * containers, a pipe, a file), and in which form: text (one readable line per
 * event) or JSON (one object per line, for log pipelines).
 *
 * By default a line is written for what an operator acts on, not for what
 * merely went well: a retry, a dead item, a cancel, a lease lost, a storage
 * error; and a periodic summary (done, retried, dead, given back, running and
 * the rate since the last one). The routine lines of each item ("started",
 * "done", the outcomes a task chose that are not failures: snoozed, absorbed,
 * and "released", given back unrun: at a stop, or from the prefetch buffer
 * when it waited too long there, thousands of lines on an overloaded host,
 * measured) are opt-in (`--log-items`): written one per event they
 * cost about half the throughput of a busy worker, and a log of a million
 * "done" lines says less than one summary line. See docs/operations.md.
 */
import * as Duration from "effect/Duration"
import type { Counters, Event, Tag } from "../Events.js"
import { oneLine } from "./format.js"

/** The form of the command's log lines. */
export type LogFormat = "text" | "json"

export const LOG_FORMATS: ReadonlyArray<LogFormat> = ["text", "json"]

/** How the worker command logs when it logs lines (not the terminal's status line). */
export interface LogOptions {
  readonly format: LogFormat
  /** Also a line per routine item event (started, done, snoozed, absorbed). */
  readonly items: boolean
  /** The period of the summary line; null: none. */
  readonly summaryMs: number | null
}

export type Level = "info" | "warn" | "error"

/** One log record: its event name, level, message and fields (for JSON). */
export interface LogRecord {
  readonly level: Level
  readonly event: string
  readonly message: string
  readonly fields?: Readonly<Record<string, unknown>>
}

// Which events make a line: every one with `--log-items`, else the noteworthy ones.
const LINES: Record<Tag, "routine" | "noteworthy" | "none"> = {
  Claimed: "none",
  Started: "routine",
  Completed: "routine",
  Snoozed: "routine",
  Absorbed: "routine",
  Released: "routine",
  Retried: "noteworthy",
  Dead: "noteworthy",
  Cancelled: "noteworthy",
  LeaseLost: "noteworthy",
  StorageFailed: "noteworthy",
  Stopped: "none"
}

/** The events of an item that went as planned: a line each only with `--log-items`. */
export const isRoutine = (event: Event): boolean => LINES[event._tag] === "routine"

/** The events that make a line without `--log-items` (what the command subscribes to then). */
export const NOTEWORTHY: ReadonlyArray<Tag> = (Object.keys(LINES) as Array<Tag>).filter((tag) => LINES[tag] === "noteworthy")

const ms = (n: number) => (n < 1000 ? `${Math.round(n)} ms` : Duration.format(Duration.millis(Math.round(n))))

/** The text of an event's line, without its time (null for events not worth a line). */
export const eventText = (event: Event): string | null => {
  switch (event._tag) {
    case "Claimed":
    case "Stopped":
      return null
    case "Started":
      return `started ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt})`
    case "Completed":
      return `done ${event.claim.kind} #${event.claim.id} in ${ms(event.durationMs)}`
    case "Retried":
      return `retry ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt} of ${event.claim.maxAttempts}) in ${
        ms(event.delayMs)
      }: ${oneLine(event.error)}`
    case "Snoozed":
      return `snooze ${event.claim.kind} #${event.claim.id} (snooze ${event.claim.snoozes + 1}; attempt not counted) for ${
        ms(event.delayMs)
      }: ${oneLine(event.reason)}`
    case "Dead":
      return `dead ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt}): ${oneLine(event.error)}`
    case "Cancelled":
      return event.source === "cancel"
        ? `cancelled ${event.claim.kind} #${event.claim.id} (stopped here, nothing recorded): ${oneLine(event.error)}`
        : `cancelled ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt}): ${oneLine(event.error)}`
    case "Absorbed":
      return `absorbed ${event.claim.kind} #${event.claim.id} (a waiting item with its key stands for it)`
    case "Released":
      return `released ${event.claim.kind} #${event.claim.id} (given back; attempt not counted)`
    case "LeaseLost":
      return `lease lost ${event.claim.kind} #${event.claim.id} (run interrupted, nothing recorded)`
    case "StorageFailed":
      // A StorageError's message already says "storage error in <operation>: ...".
      return event.error.startsWith(`storage error in ${event.operation}`)
        ? oneLine(event.error)
        : `storage error in ${event.operation}: ${oneLine(event.error)}`
  }
}

const EVENT_NAMES: Record<Event["_tag"], string> = {
  Claimed: "claimed",
  Started: "started",
  Completed: "done",
  Retried: "retry",
  Snoozed: "snoozed",
  Dead: "dead",
  Cancelled: "cancelled",
  Absorbed: "absorbed",
  Released: "released",
  LeaseLost: "lease lost",
  StorageFailed: "storage error",
  Stopped: "stopped"
}

const levelOf = (event: Event): Level =>
  event._tag === "Dead" || event._tag === "StorageFailed"
    ? "error"
    : event._tag === "Retried" || event._tag === "LeaseLost" || event._tag === "Cancelled"
    ? "warn"
    : "info"

/** An event's fields for a JSON line. */
const eventFields = (event: Event): Record<string, unknown> => {
  if (event._tag === "StorageFailed") return { operation: event.operation, error: event.error }
  if (event._tag === "Stopped") return {}
  const { claim } = event
  const base = { kind: claim.kind, id: claim.id, attempt: claim.attempt }
  switch (event._tag) {
    case "Completed":
      return { ...base, durationMs: Math.round(event.durationMs * 1000) / 1000 }
    case "Retried":
      return { ...base, maxAttempts: claim.maxAttempts, delayMs: event.delayMs, error: event.error }
    case "Snoozed":
      return { ...base, snoozes: claim.snoozes + 1, delayMs: event.delayMs, reason: event.reason }
    case "Dead":
      return { ...base, error: event.error }
    case "Cancelled":
      return { ...base, source: event.source, error: event.error }
    default:
      return base
  }
}

/** An event's record (null for events not worth a line). */
export const eventRecord = (event: Event): LogRecord | null => {
  const message = eventText(event)
  if (message === null) return null
  return { level: levelOf(event), event: EVENT_NAMES[event._tag], message, fields: eventFields(event) }
}

/** A record as one line (no newline) in the given form, at `time`. */
export const render = (format: LogFormat, time: Date, record: LogRecord): string => {
  if (format === "text") return `${time.toISOString()} ${record.message}`
  return JSON.stringify({
    time: time.toISOString(),
    level: record.level,
    event: record.event,
    ...record.fields,
    message: record.message
  })
}

/** The counters a summary is made of. */
type Totals = Pick<Counters, "completed" | "retried" | "dead" | "snoozed" | "cancelled" | "released" | "running">

/**
 * The periodic summary: what happened since the last one. Null when there is
 * nothing to say (nothing finished and nothing running: an idle worker stays
 * quiet; its heartbeat is in the database, see `docket workers`).
 */
export const summaryRecord = (previous: Totals, now: Totals, periodMs: number): LogRecord | null => {
  const done = now.completed - previous.completed
  const retried = now.retried - previous.retried
  const dead = now.dead - previous.dead
  const snoozed = now.snoozed - previous.snoozed
  const cancelled = now.cancelled - previous.cancelled
  const released = now.released - previous.released
  if (done + retried + dead + snoozed + cancelled + released === 0 && now.running === 0) return null
  const perSecond = periodMs > 0 ? done / (periodMs / 1000) : 0
  const rate = perSecond.toFixed(perSecond < 10 ? 1 : 0)
  const extra = [
    snoozed > 0 ? `, snoozed ${snoozed}` : "",
    cancelled > 0 ? `, cancelled ${cancelled}` : "",
    released > 0 ? `, given back ${released}` : ""
  ].join("")
  return {
    level: "info",
    event: "summary",
    message: `summary over ${periodMs < 1000 ? `${Math.round(periodMs)} ms` : `${(periodMs / 1000).toFixed(1)} s`}: done ${done} (${rate}/s), retried ${retried}, dead ${dead}${extra}, ` +
      `running ${now.running}; since start: done ${now.completed}, retried ${now.retried}, dead ${now.dead}`,
    fields: {
      periodMs: Math.round(periodMs),
      done,
      perSecond: Number(perSecond.toFixed(1)),
      retried,
      dead,
      snoozed,
      cancelled,
      released,
      running: now.running,
      totalDone: now.completed,
      totalRetried: now.retried,
      totalDead: now.dead
    }
  }
}
