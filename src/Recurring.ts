/**
 * Recurring items: a schedule enqueues an item of its kind at every tick of
 * a cron expression, exactly once per tick across every worker pool that
 * declares it, with no leader and no lock held between ticks
 * (docs/concepts.md, "Recurring items").
 *
 * A schedule is a value; pass it to a pool (`Worker.Options.recurring`, and
 * so `Docket.layer`). The pool checks it at start (a bad one fails the layer
 * with `InvalidSchedule` naming it), declares it in the database, and enqueues
 * its ticks on the database's clock. Each tick's item is due at the tick
 * (`job.runAt` on its first attempt), carries the declared payload and the key
 * `<name>@<tick ISO 8601>` (`tickOf(job)` reads it back, on every attempt).
 *
 * @example
 * ```ts
 * const nightly = Recurring.make("report.nightly", {
 *   cron: "0 2 * * *", tz: "Europe/Paris", kind: "report.build", payload: { scope: "all" }
 * })
 * Docket.layer({ handlers: [BuildReport], recurring: [nightly] })
 * ```
 */
import * as Either from "effect/Either"
import { InvalidSchedule } from "./Errors.js"
import * as Ticks from "./internal/recurring/ticks.js"
import * as V from "./internal/validate.js"

/**
 * What a pool starting after a stop enqueues for the ticks due while no pool
 * declaring the schedule ran: "skip" none, "one" (default) the latest,
 * "all" each of them, at most the 1,000 most recent.
 */
export type Missed = Ticks.Missed

/** The options of `make`. */
export interface Options {
  /**
   * A cron expression as effect's `Cron` reads it: 5 fields (minute hour
   * day-of-month month day-of-week) or 6 with seconds first (`* * * * * *`
   * is every second).
   */
  readonly cron: string
  /** The kind of the items enqueued. */
  readonly kind: string
  /** The payload of every tick's item (any JSON value; default null). */
  readonly payload?: unknown
  /** The IANA time zone the expression is read in (default UTC), e.g. "America/New_York". */
  readonly tz?: string | undefined
  readonly missed?: Missed | undefined
}

/** A declared schedule (a value: nothing runs until a pool is given it). */
export interface Recurring {
  readonly _tag: "Recurring"
  /** Unique among the schedules of a queue: letters, digits and _ . : - (as a kind). */
  readonly name: string
  readonly cron: string
  readonly kind: string
  readonly payload: unknown
  readonly tz: string | null
  readonly missed: Missed
}

/** A schedule named `name` (checked when a pool starts with it, not here). */
export const make = (name: string, options: Options): Recurring => ({
  _tag: "Recurring",
  name,
  cron: options.cron,
  kind: options.kind,
  payload: options.payload === undefined ? null : options.payload,
  tz: options.tz ?? null,
  missed: options.missed ?? "one"
})

/** At most this many missed ticks are enqueued under `missed: "all"`, and at most this many ticks per pass. */
export const MISSED_BOUND: number = Ticks.TICK_BOUND

/** A schedule checked and encoded for the store. */
export interface Declaration {
  readonly name: string
  readonly kind: string
  readonly cron: string
  readonly tz: string | null
  readonly payloadJson: string
  readonly missed: Missed
}

const MODES: ReadonlyArray<string> = ["skip", "one", "all"]

/** Checks a schedule: its name, kind, expression and zone (parsed with effect's Cron), payload and mode. */
export const check = (schedule: Recurring): Either.Either<Declaration, InvalidSchedule> => {
  const name = typeof schedule?.name === "string" ? schedule.name : String(schedule?.name)
  const refuse = (reason: string) => Either.left(new InvalidSchedule({ name, reason }))
  const checkedName = V.checkKind(schedule.name)
  if (Either.isLeft(checkedName)) return refuse(`its name ${checkedName.left.reason}`)
  const kind = V.checkKind(schedule.kind)
  if (Either.isLeft(kind)) return refuse(`its kind ${kind.left.reason}`)
  if (typeof schedule.cron !== "string") return refuse("cron must be a cron expression (a string)")
  if (schedule.tz !== null && typeof schedule.tz !== "string") return refuse("tz must be an IANA time zone name")
  const parsed = Ticks.parse(schedule.cron, schedule.tz)
  if (Either.isLeft(parsed)) {
    return refuse(`cron ${JSON.stringify(schedule.cron)}${schedule.tz === null ? "" : ` in ${schedule.tz}`}: ${parsed.left}`)
  }
  if (!MODES.includes(schedule.missed)) return refuse(`missed must be "skip", "one" or "all" (got ${String(schedule.missed)})`)
  const payload = V.encodePayload(schedule.payload, V.DEFAULT_MAX_PAYLOAD_BYTES)
  if (Either.isLeft(payload)) return refuse(`its payload ${payload.left.reason}`)
  return Either.right({
    name: checkedName.right,
    kind: kind.right,
    cron: schedule.cron,
    tz: schedule.tz,
    payloadJson: payload.right,
    missed: schedule.missed
  })
}

/** Checks a pool's schedules (every one, and no name twice). */
export const checkAll = (schedules: ReadonlyArray<Recurring>): Either.Either<ReadonlyArray<Declaration>, InvalidSchedule> =>
  Either.gen(function*() {
    const seen = new Set<string>()
    const out: Array<Declaration> = []
    for (const schedule of schedules) {
      const declaration = yield* check(schedule)
      if (seen.has(declaration.name)) {
        return yield* Either.left(new InvalidSchedule({ name: declaration.name, reason: "declared twice in this pool" }))
      }
      seen.add(declaration.name)
      out.push(declaration)
    }
    return out
  })

/**
 * The tick a recurring item was enqueued for (epoch ms), read from its key
 * (`<name>@<tick ISO>`); undefined for an item no schedule enqueued. Stable
 * across retries, unlike `runAt`, which a retry's backoff moves.
 */
export const tickOf = (job: { readonly key: string | null }): number | undefined => {
  const at = job.key?.lastIndexOf("@") ?? -1
  if (at < 0) return undefined
  const iso = job.key!.slice(at + 1)
  const time = Date.parse(iso)
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(iso) && Number.isFinite(time) ? time : undefined
}

/** A recurring schedule as stored (`QueueRepo.listSchedules`, `docket recurring list`). */
export interface ScheduleInfo {
  readonly name: string
  readonly kind: string
  readonly cron: string
  /** The IANA zone the expression is read in; null for UTC. */
  readonly tz: string | null
  /** The payload of every tick's item, as stored (parsed JSON). */
  readonly payload: unknown
  readonly missed: "skip" | "one" | "all"
  /** The first tick not yet enqueued (epoch ms). */
  readonly nextTick: number
  /** The latest tick enqueued (epoch ms), if any. */
  readonly lastTick: number | null
  /**
   * The latest tick's item: its id and state, the state null when the item is
   * no longer stored (pruned after its retention, or deleted).
   */
  readonly lastItem: { readonly id: number; readonly state: string | null } | null
  /** When a declaring pool last touched it (epoch ms, database clock). */
  readonly declaredAt: number
  readonly declaredAgeMs: number
  /** "stopped": no live pool declares it (not touched for 15 s); nobody ticks it. */
  readonly status: "live" | "stopped"
  readonly createdAt: number
  readonly updatedAt: number
}

/** What a pool's declaration of a schedule did (`QueueRepo.declareSchedule`). */
export interface DeclareOutcome {
  /** "new": first declared; "changed": its expression or zone changed (from the next tick); "kept": as stored. */
  readonly declared: "new" | "changed" | "kept"
  /** Items enqueued for ticks missed while no pool ran (its `missed` mode), in tick order. */
  readonly missed: ReadonlyArray<number>
}

/** What one pass over schedules did (`QueueRepo.tickSchedules`). */
export interface TickPass {
  /** Items enqueued in the pass. */
  readonly enqueued: number
  /** Milliseconds from the database's now until the earliest next tick of these schedules, if any is stored. */
  readonly nextInMs: number | null
}
