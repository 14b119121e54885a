/**
 * What a running worker shows. In a terminal: one status line, rewritten in
 * place (running, done, retried, dead, done per second). In a pipe or file:
 * one log line per event. Log messages (warnings) go to stderr, one line each,
 * without breaking the status line.
 */
import { Cause, Duration, Effect, HashMap, Logger, Queue, type Scope } from "effect"
import type { Event } from "../Events.js"
import { StorageErrorLog } from "../internal/worker/events.js"
import type * as Worker from "../Worker.js"
import { oneLine } from "./format.js"

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

  /** Writes a whole line above the status line. */
  print(stream: NodeJS.WriteStream, text: string): void {
    if (this.active && this.shown !== "") {
      process.stdout.write(CLEAR_LINE)
      stream.write(text + "\n")
      process.stdout.write(this.shown)
    } else {
      stream.write(text + "\n")
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

/** Prints a line on stdout (above the status line when one is shown). */
export const printLine = (text: string) => Effect.sync(() => statusLine.print(process.stdout, text))

/** Prints a line on stderr (above the status line when one is shown). */
export const printError = (text: string) => Effect.sync(() => statusLine.print(process.stderr, text))

const messageText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => (typeof part === "string" ? part : part instanceof Error ? part.message : JSON.stringify(part)))
    .join(" ")
}

/** Log lines: `<level>: <message> (key=value ...)`, one line each, on stderr. */
export const logger = Logger.make(({ annotations, cause, logLevel, message }) => {
  let text = `${logLevel.label.toLowerCase()}: ${messageText(message)}`
  const notes = [...HashMap.toEntries(annotations)].map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
  if (notes.length > 0) text += ` (${notes.join(" ")})`
  if (!Cause.isEmpty(cause)) text += `: ${Cause.pretty(cause)}`
  statusLine.print(process.stderr, oneLine(text))
})

/** The logger of the command: replaces Effect's default one. */
export const loggerLayer = Logger.replace(Logger.defaultLogger, logger)

const ms = (n: number) => (n < 1000 ? `${Math.round(n)} ms` : Duration.format(Duration.millis(Math.round(n))))

/** One log line for an event (null for events not worth a line). */
export const describeEvent = (event: Event): string | null => {
  const time = new Date().toISOString()
  switch (event._tag) {
    case "Claimed":
      return null
    case "Started":
      return `${time} started ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt})`
    case "Completed":
      return `${time} done ${event.claim.kind} #${event.claim.id} in ${ms(event.durationMs)}`
    case "Retried":
      return `${time} retry ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt} of ${event.claim.maxAttempts}) in ${
        ms(event.delayMs)
      }: ${oneLine(event.error)}`
    case "Snoozed":
      return `${time} snooze ${event.claim.kind} #${event.claim.id} (snooze ${event.claim.snoozes + 1}; attempt not counted) for ${
        ms(event.delayMs)
      }: ${oneLine(event.reason)}`
    case "Dead":
      return `${time} dead ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt}): ${oneLine(event.error)}`
    case "Cancelled":
      return event.source === "cancel"
        ? `${time} cancelled ${event.claim.kind} #${event.claim.id} (stopped here, nothing recorded): ${oneLine(event.error)}`
        : `${time} cancelled ${event.claim.kind} #${event.claim.id} (attempt ${event.claim.attempt}): ${oneLine(event.error)}`
    case "Absorbed":
      return `${time} absorbed ${event.claim.kind} #${event.claim.id} (a waiting item with its key stands for it)`
    case "Released":
      return `${time} released ${event.claim.kind} #${event.claim.id} (given back; attempt not counted)`
    case "LeaseLost":
      return `${time} lease lost ${event.claim.kind} #${event.claim.id} (run interrupted, nothing recorded)`
    case "StorageFailed":
      // A StorageError's message already says "storage error in <operation>: ...".
      return event.error.startsWith(`storage error in ${event.operation}`)
        ? `${time} ${oneLine(event.error)}`
        : `${time} storage error in ${event.operation}: ${oneLine(event.error)}`
    case "Stopped":
      return null
  }
}

/** The status line's text. */
export const describeCounters = (counters: Worker.Counters, perSecond: number): string =>
  `docket: running ${counters.running}  done ${counters.completed}  retried ${counters.retried}  dead ${counters.dead}  ${
    perSecond.toFixed(perSecond < 10 ? 1 : 0)
  }/s`

/**
 * Shows the worker's progress until the scope closes: the status line in a
 * terminal, else a log line per event.
 */
export const show = (worker: Worker.Service, tty: boolean): Effect.Effect<void, never, Scope.Scope> =>
  tty ? showStatusLine(worker) : showEvents(worker)

const showEvents = (worker: Worker.Service) =>
  Effect.gen(function*() {
    const events = yield* worker.subscribe
    // Storage errors as the pool logs them: at most one line per operation and period.
    const storageLog = new StorageErrorLog()
    yield* Queue.take(events).pipe(
      Effect.flatMap((event) => {
        const note = event._tag === "StorageFailed" ? storageLog.failed(event.operation, Date.now()) : ""
        const line = note === undefined ? null : describeEvent(event)
        return line === null ? Effect.void : printLine(line + note)
      }),
      Effect.forever,
      Effect.catchAllCause(() => Effect.void),
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
