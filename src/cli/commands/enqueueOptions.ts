/**
 * The options and arguments of `docket enqueue` (one item, or `--from` a
 * file): read by both enqueue.ts and enqueueBulk.ts, so neither imports the other.
 */
import * as Args from "@effect/cli/Args"
import type * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as V from "../../internal/validate.js"
import { databaseOption, durationOption, integerOption, optionalText, timeOption } from "../options.js"

/** The command's options and arguments. */
export const enqueueConfig = {
  database: databaseOption,
  kind: Args.text({ name: "kind" }).pipe(Args.withDescription("The item's kind (its handler's name)."), Args.optional),
  payload: Args.text({ name: "json-payload" }).pipe(
    Args.withDescription("The payload as JSON (default null)."),
    Args.optional
  ),
  key: optionalText(
    "key",
    "key",
    "Dedupe key: while an item of this kind and key waits, another enqueue of it does what --on-conflict says."
  ),
  onConflict: Options.choice("on-conflict", V.ON_CONFLICT_MODES).pipe(
    Options.withDescription(
      "With --key, when an item of this kind and key waits: keep it (the default), replace its payload and due time, " +
        "debounce (replace; the due time only moves later), or replaceRunning (replace, and cancel a running one)."
    ),
    Options.optional
  ),
  group: optionalText(
    "group",
    "group",
    "The item's group inside its kind (a customer, an endpoint): the kind's perGroup limits apply to it."
  ),
  delay: durationOption("delay", "Due after this long: 500ms, 30s, 5m, 1h or milliseconds.").pipe(Options.optional),
  runAt: timeOption("run-at", "Due at this ISO 8601 time (2030-01-01T09:00:00Z; without an offset, local time).")
    .pipe(Options.optional),
  priority: integerOption("priority", "Higher runs first among due items. Default: 0.", {
    min: -V.MAX_PRIORITY,
    max: V.MAX_PRIORITY
  }).pipe(Options.optional),
  maxAttempts: integerOption(
    "max-attempts",
    "Attempts before the item is dead. Default: the queue's, 8.",
    { min: 1, max: V.MAX_ATTEMPTS_LIMIT }
  ).pipe(Options.optional),
  from: optionalText(
    "from",
    "file",
    "Bulk: an NDJSON file (or - for stdin), one object a line: " +
      `{"kind":..,"payload":..} with any of "key", "onConflict", "group", "delay", "runAt", "priority", ` +
      `"maxAttempts". ` +
      "A bad line refuses the whole file."
  )
}

/** The parsed arguments and options of `docket enqueue`. */
/** What the command was given. */
export type EnqueueArgs = Command.Command.ParseConfig<typeof enqueueConfig>
