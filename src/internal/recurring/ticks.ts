/**
 * A schedule's ticks: pure functions of a parsed cron expression and times
 * (epoch ms, UTC), with no clock of their own, so the store computes them from
 * the database's clock and tests from fixed times.
 *
 * Time zones and DST are effect's `Cron` (verified in test/recurring.test.ts,
 * America/New_York): a local time that does not exist on a spring-forward day
 * (02:30 on 2026-03-08) fires once, an hour later by the wall clock (03:30 EDT);
 * a local time that happens twice on a fall-back day (01:30 on 2026-11-01)
 * fires once, at its first occurrence (EDT), so an hourly schedule has no
 * tick at the repeated 01:00 EST hour. A schedule without a zone is UTC.
 */
import * as Cron from "effect/Cron"
import * as Either from "effect/Either"

/** At most this many ticks are enqueued in one pass, and at most this many missed ticks under `missed: "all"`. */
export const TICK_BOUND = 1000

/** A cron expression read in a time zone (null: UTC), or why effect's Cron refuses it. */
export const parse = (expression: string, tz: string | null): Either.Either<Cron.Cron, string> =>
  Either.mapLeft(Cron.parse(expression, tz ?? "UTC"), (error) => error.message)

/** The first tick strictly after `time`. */
export const firstAfter = (cron: Cron.Cron, time: number): number => Cron.next(cron, new Date(time)).getTime()

/**
 * The latest tick at or before `time`, if any since `notBefore`. Not
 * `Cron.prev(time)` alone: effect's steps back from the start of the second
 * `time` falls in, so from 12:00:05.300 it gives 12:00:04 and from an hourly
 * 12:00:00.001 it gives 11:00 (found by the reliability scenario: the missed
 * "one" tick was a second early and the tick after it never enqueued). From an
 * exact tick it gives the one before, as it should; so the guess is taken a
 * second later and corrected with exact ticks both ways.
 */
export const latestAtOrBefore = (cron: Cron.Cron, time: number, notBefore: number): number | undefined => {
  let tick = Cron.prev(cron, new Date(time + 1000)).getTime()
  while (tick > time) tick = Cron.prev(cron, new Date(tick)).getTime()
  for (let next = firstAfter(cron, tick); next <= time; next = firstAfter(cron, next)) tick = next
  return tick >= notBefore ? tick : undefined
}

/** Ticks to enqueue and the schedule's next tick after them. */
export interface Due {
  readonly ticks: ReadonlyArray<number>
  readonly next: number
}

/**
 * The ticks due by `now` from `nextTick` (the first not yet enqueued, itself
 * a tick), at most `bound` of them in time order; `next` is the first one left
 * (after `now`, or the one past the bound: the next pass takes it).
 */
export const due = (cron: Cron.Cron, nextTick: number, now: number, bound = TICK_BOUND): Due => {
  const ticks: Array<number> = []
  let tick = nextTick
  while (tick <= now && ticks.length < bound) {
    ticks.push(tick)
    tick = firstAfter(cron, tick)
  }
  return { ticks, next: tick }
}

/** What a schedule does with the ticks due while no pool ran (`Recurring.Options.missed`). */
export type Missed = "skip" | "one" | "all"

/**
 * The missed ticks (from `nextTick` to `now`) to enqueue under a mode, in time
 * order: none, the latest, or every one (the `bound` most recent: an hourly
 * schedule stopped for a year enqueues its last 1,000 hours, not 8,760 items).
 * Afterwards the schedule goes on from the first tick after `now`.
 */
export const missed = (mode: Missed, cron: Cron.Cron, nextTick: number, now: number, bound = TICK_BOUND): Due => {
  const next = firstAfter(cron, now)
  if (nextTick > now || mode === "skip") return { ticks: [], next }
  const latest = latestAtOrBefore(cron, now, nextTick)
  if (latest === undefined) return { ticks: [], next }
  if (mode === "one") return { ticks: [latest], next }
  const ticks = [latest]
  for (let tick = latest; ticks.length < bound;) {
    const before = Cron.prev(cron, new Date(tick)).getTime()
    if (before < nextTick) break
    ticks.push(before)
    tick = before
  }
  return { ticks: ticks.reverse(), next }
}

/** The dedupe key of a tick's item: the schedule's name and the tick (ISO 8601, UTC), e.g. `report@2026-03-08T10:00:00.000Z`. */
export const tickKey = (name: string, tick: number): string => `${name}@${new Date(tick).toISOString()}`
