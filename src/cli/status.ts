/**
 * What a running worker shows. In a terminal: one status line, rewritten in
 * place (running, done, retried, dead, done per second). In a pipe or file
 * (systemd, containers): log lines, text or JSON (`--log-format`), for the
 * failures and abnormal events, a periodic summary (`--summary`) and, opt-in
 * (`--log-items`), a line per routine item event; see src/cli/logFormat.ts
 * for what is written and why. Lines are batched: the events taken in one
 * turn are written with one `write`, not one each (a syscall per line saved;
 * its gain measured in bench/command.ts was within a shared machine's noise:
 * docs/benchmarks.md, issue 19; what made the default cheap is no line per
 * item). Log
 * messages (warnings) go to stderr, one line each, in the same format, without
 * breaking the status line.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Event } from "../Events.js"
import { StorageErrorLog } from "../internal/worker/events.js"
import type * as Worker from "../Worker.js"
import { oneLine } from "./format.js"
import { eventRecord, eventText, isRoutine, NOTEWORTHY, type LogFormat, type LogOptions, type LogRecord, render, summaryRecord } from "./logFormat.js"

const CLEAR_LINE = "\r\x1b[2K"

/** The status line of this process, if one is shown (stdout in a terminal). */
class StatusLine {
  private shown = ""
  active = false

  /** Replaces the status line. */
  draw(text: string): void {
    if (!this.active) return
    const width = process.stdout.columns ?? 0
    const line = width > 1 && text.length >= width ? text.slice(0, width - 1) : text
    if (line === this.shown) return
    this.shown = line
    process.stdout.write(CLEAR_LINE + line)
  }

  /** Writes whole lines (each ending in a newline) above the status line. */
  print(stream: NodeJS.WriteStream, text: string): void {
    if (this.active && this.shown !== "") {
      process.stdout.write(CLEAR_LINE)
      stream.write(text)
      process.stdout.write(this.shown)
    } else {
      stream.write(text)
    }
  }

  /** Leaves the status line as it is and moves below it. */
  end(): void {
    if (this.active && this.shown !== "") process.stdout.write("\n")
    this.active = false
    this.shown = ""
  }
}

/** The one status line of this process (shown only in a terminal). */
export const statusLine = new StatusLine()

/** The form of this process's log lines (`--log-format`; text unless the worker command says otherwise). */
let logFormat: LogFormat = "text"

/** Sets the form of the log lines of this process (the worker command's `--log-format`). */
export const setLogFormat = (format: LogFormat) => Effect.sync(() => void (logFormat = format))

/** Prints a line on stdout (above the status line when one is shown). */
export const printLine = (text: string) => Effect.sync(() => statusLine.print(process.stdout, text + "\n"))

/** Prints a line on stderr (above the status line when one is shown). */
export const printError = (text: string) => Effect.sync(() => statusLine.print(process.stderr, text + "\n"))

/**
 * Prints a record on stdout: its message as it is in text (the worker's
 * started/stopping/stopped lines carry no time, as before), a JSON object with
 * its fields in JSON.
 */
export const printRecord = (record: LogRecord) =>
  Effect.sync(() =>
    statusLine.print(process.stdout, (logFormat === "text" ? record.message : render("json", new Date(), record)) + "\n")
  )

const messageText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => (typeof part === "string" ? part : part instanceof Error ? part.message : JSON.stringify(part)))
    .join(" ")
}

const LEVELS: Record<string, "info" | "warn" | "error"> = { WARN: "warn", ERROR: "error", FATAL: "error" }

/** Log lines, on stderr: `<level>: <message> (key=value ...)` in text, an object per line in JSON. */
export const logger = Logger.make(({ annotations, cause, logLevel, message }) => {
  const text = messageText(message)
  const notes = [...HashMap.toEntries(annotations)]
  if (logFormat === "json") {
    const record: LogRecord = {
      level: LEVELS[logLevel.label] ?? "info",
      event: "log",
      message: text,
      fields: { ...Object.fromEntries(notes), ...(Cause.isEmpty(cause) ? {} : { cause: Cause.pretty(cause) }) }
    }
    statusLine.print(process.stderr, render("json", new Date(), record) + "\n")
    return
  }
  let line = `${logLevel.label.toLowerCase()}: ${text}`
  const shown = notes.map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
  if (shown.length > 0) line += ` (${shown.join(" ")})`
  if (!Cause.isEmpty(cause)) line += `: ${Cause.pretty(cause)}`
  statusLine.print(process.stderr, oneLine(line) + "\n")
})

/** The logger of the command: replaces Effect's default one. */
export const loggerLayer = Logger.replace(Logger.defaultLogger, logger)

/** One text log line for an event, with its time (null for events not worth a line). */
export const describeEvent = (event: Event): string | null => {
  const text = eventText(event)
  return text === null ? null : `${new Date().toISOString()} ${text}`
}

/** The status line's text. */
export const describeCounters = (counters: Worker.Counters, perSecond: number): string =>
  `docket: running ${counters.running}  done ${counters.completed}  retried ${counters.retried}  dead ${counters.dead}  ${
    perSecond.toFixed(perSecond < 10 ? 1 : 0)
  }/s`

/** What `show` logs when it logs lines; the demo's: every event, in text, no summary. */
const EVERY_EVENT: LogOptions = { format: "text", items: true, summaryMs: null }

/**
 * Shows the worker's progress until the scope closes: the status line in a
 * terminal, else log lines.
 */
export const show = (
  worker: Worker.Service,
  tty: boolean,
  options: LogOptions = EVERY_EVENT
): Effect.Effect<void, never, Scope.Scope> =>
  tty ? showStatusLine(worker) : Effect.zipRight(showEvents(worker, options), showSummaries(worker, options))

// The most events taken (and written) at once.
const BATCH = 4096

const showEvents = (worker: Worker.Service, options: LogOptions) =>
  Effect.gen(function*() {
    // Without per-item lines, only the events that make a line: the pool then
    // makes no event for an item that ran well.
    const events: Queue.Dequeue<Event> = options.items ? yield* worker.subscribe : yield* worker.subscribeTo(NOTEWORTHY)
    // Storage errors as the pool logs them: at most one line per operation and period.
    const storageLog = new StorageErrorLog()
    const lineOf = (event: Event, time: Date): string | null => {
      if (!options.items && isRoutine(event)) return null
      const note = event._tag === "StorageFailed" ? storageLog.failed(event.operation, time.getTime()) : ""
      if (note === undefined) return null
      const record = eventRecord(event)
      if (record === null) return null
      return options.format === "text"
        ? render("text", time, record) + note
        : render("json", time, note === "" ? record : { ...record, message: record.message + note })
    }
    yield* Queue.takeBetween(events, 1, BATCH).pipe(
      Effect.flatMap((batch) =>
        Effect.sync(() => {
          const time = new Date()
          let text = ""
          for (const event of batch) {
            const line = lineOf(event, time)
            if (line !== null) text += line + "\n"
          }
          // One write for the whole batch.
          if (text !== "") statusLine.print(process.stdout, text)
        })
      ),
      Effect.forever,
      Effect.catchAllCause(() => Effect.void),
      Effect.forkScoped
    )
  })

/** A summary line every period, when there is something to say. */
const showSummaries = (worker: Worker.Service, options: LogOptions) =>
  Effect.gen(function*() {
    const periodMs = options.summaryMs
    if (periodMs === null) return
    let previous = yield* worker.counters
    let at = performance.now()
    yield* Effect.sleep(periodMs).pipe(
      Effect.zipRight(worker.counters),
      Effect.flatMap((counters) =>
        Effect.sync(() => {
          const now = performance.now()
          const record = summaryRecord(previous, counters, now - at)
          previous = counters
          at = now
          if (record !== null) statusLine.print(process.stdout, render(options.format, new Date(), record) + "\n")
        })
      ),
      Effect.forever,
      Effect.forkScoped
    )
  })

const showStatusLine = (worker: Worker.Service) =>
  Effect.gen(function*() {
    statusLine.active = true
    // Done per second over the last five seconds.
    const samples: Array<{ at: number; done: number }> = []
    const draw = Effect.flatMap(worker.counters, (counters) =>
      Effect.sync(() => {
        const now = performance.now()
        samples.push({ at: now, done: counters.completed })
        while (samples.length > 1 && now - samples[0].at > 5000) samples.shift()
        const first = samples[0]
        const span = (now - first.at) / 1000
        const rate = span > 0.2 ? (counters.completed - first.done) / span : 0
        statusLine.draw(describeCounters(counters, rate))
      }))
    yield* Effect.addFinalizer(() => Effect.zipRight(draw, Effect.sync(() => statusLine.end())))
    yield* draw.pipe(Effect.zipRight(Effect.sleep("250 millis")), Effect.forever, Effect.forkScoped)
  })
