/**
 * Recurring schedules in the store: a pool's declaration, the ticks, the
 * touch that keeps a declared schedule live, and the listing.
 *
 * Exactly once per tick: a tick's items are inserted in the transaction of
 * the compare-and-set that moves the schedule's next_tick past them
 * (sql/scheduleAdvance.ts), and only when it matched. Of any number of pools that
 * read the same next_tick, one moves it; the others' compare-and-set matches
 * nothing and they insert nothing. A failure after the compare-and-set (the
 * insert refused, the process killed, the connection lost) rolls both back:
 * the ticks are still due, and the next pass of any pool takes them.
 *
 * Ticks are computed here (effect's Cron, ../recurring/ticks.ts) from the
 * database's now, read in the statement that reads the schedules, never
 * from this machine's clock.
 */
import type * as Cron from "effect/Cron"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { DeclareOutcome, EnqueueRequest, ScheduleInfo, TickPass } from "../../Domain.js"
import { InvalidInput, StorageError } from "../../Errors.js"
import type { Declaration } from "../../Recurring.js"
import type * as Wakeups from "../../Wakeups.js"
import type { ScheduleRow } from "../sql/scheduleRead.js"
import { num, type ScheduleFields } from "../sql/rows.js"
import type * as Storage from "../storage.js"
import { GONE_AFTER_MS } from "../liveness.js"
import * as Ticks from "../recurring/ticks.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** The schedule operations of the store. */
export type Schedules = Pick<
  Service,
  "declareSchedule" | "tickSchedule" | "tickSchedules" | "touchSchedules" | "listSchedules"
>

type EI = InvalidInput | StorageError

/** A declaration that lost this many compare-and-sets in a row gives up (each loss is another pool's write). */
const DECLARE_ROUNDS = 20

// Parsed expressions, by expression and zone: a pass parses nothing twice.
const parsed = new Map<string, Either.Either<Cron.Cron, string>>()
const cronOf = (cron: string, tz: string | null): Either.Either<Cron.Cron, string> => {
  const key = `${cron}\u0000${tz ?? ""}`
  let entry = parsed.get(key)
  if (entry === undefined) {
    entry = Ticks.parse(cron, tz)
    if (parsed.size > 1000) parsed.clear()
    parsed.set(key, entry)
  }
  return entry
}

const isStale = (row: ScheduleRow, now: number) => now - num(row.declared_at) > GONE_AFTER_MS

/** A stored schedule as `listSchedules` shows it; stopped when no pool touched it for 15 s. */
export const toScheduleInfo = (row: ScheduleRow, now: number): ScheduleInfo => {
  let payload: unknown = row.payload
  try {
    payload = JSON.parse(row.payload)
  } catch {
    // shown as the text stored
  }
  const declaredAgeMs = Math.max(0, now - num(row.declared_at))
  return {
    name: row.name!,
    kind: row.kind,
    cron: row.cron,
    tz: row.tz,
    payload,
    missed: row.missed,
    nextTick: num(row.next_tick),
    lastTick: row.last_tick === null ? null : num(row.last_tick),
    lastItem: row.last_item_id === null ? null : { id: num(row.last_item_id), state: row.last_item_state },
    declaredAt: num(row.declared_at),
    declaredAgeMs,
    status: declaredAgeMs > GONE_AFTER_MS ? "stopped" : "live",
    createdAt: num(row.created_at),
    updatedAt: num(row.updated_at)
  }
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** The schedule operations over the storage; enqueues go through the store's own `enqueueMany` (dedupe, wake-ups). */
export const make = (store: Storage.Schedules & Pick<Storage.Units, "transaction">, wakeups: Wakeups.Service, enqueueMany: Service["enqueueMany"]): Schedules => {
  const read = store.scheduleRead

  // The items of `ticks`, in tick order, and the schedule's last item set to
  // the latest: inside the caller's transaction.
  const insertTicks = (name: string, kind: string, payload: string, ticks: ReadonlyArray<number>) =>
    Effect.gen(function*() {
      if (ticks.length === 0) return []
      const value: unknown = yield* Effect.try({
        try: () => JSON.parse(payload) as unknown,
        catch: (cause) =>
          new StorageError({ operation: "tickSchedule", cause: new Error(`schedule ${name}: its stored payload is not JSON`, { cause }) })
      })
      const requests = ticks.map((tick): EnqueueRequest => ({ kind, payload: value, runAt: tick, key: Ticks.tickKey(name, tick) }))
      const results = yield* enqueueMany(requests)
      const ids = results.map((r) => r.id)
      yield* store.scheduleSetLastItem(name, ids[ids.length - 1]).pipe(Effect.mapError(storage("tickSchedule")))
      return ids
    })

  // The compare-and-set and the inserts, one transaction; null when the
  // compare-and-set matched nothing (another pool moved next_tick first).
  const advance = (name: string, expected: number, due: Ticks.Due) =>
    store.transaction(Effect.gen(function*() {
      const row = yield* store.scheduleAdvance(name, expected, due.next, due.ticks[due.ticks.length - 1])
        .pipe(Effect.mapError(storage("tickSchedule")))
      if (row === null) return null
      return yield* insertTicks(name, row.kind, row.payload, due.ticks)
    })).pipe(
      Effect.mapError((e) => (e._tag === "SqlError" ? storage("tickSchedule")(e) : e)),
      // After the commit: on SQLite an in-process claimer woken before it would find nothing.
      Effect.tap((ids) => (ids === null || ids.length === 0 ? Effect.void : wakeups.enqueued))
    )

  // The ticks due from `expected` by `now`, under the row's expression; none for an expression this release cannot read.
  const dueOf = (row: ScheduleRow, expected: number, now: number) => {
    const cron = cronOf(row.cron, row.tz)
    if (Either.isLeft(cron)) {
      return Effect.as(Effect.logWarning(`docket: schedule ${row.name}: cannot read its cron (${cron.left}); not ticked`), null)
    }
    return Effect.succeed(Ticks.due(cron.right, expected, now))
  }

  const tickSchedule: Service["tickSchedule"] = (name, expected) =>
    Effect.gen(function*() {
      const { now, rows } = yield* read([name]).pipe(Effect.mapError(storage("tickSchedule")))
      const due = rows[0] === undefined ? null : yield* dueOf(rows[0], expected, now)
      if (due === null || due.ticks.length === 0) return { ticked: false, items: [] }
      const items = yield* advance(name, expected, due)
      return items === null ? { ticked: false, items: [] } : { ticked: true, items }
    })

  const tickSchedules = passOver(read, dueOf, advance)

  return {
    declareSchedule: (declaration) => declare(store, insertTicks, declaration),
    tickSchedule,
    tickSchedules,
    touchSchedules: (names) =>
      names.length === 0 ? Effect.void : store.scheduleTouch(names).pipe(Effect.mapError(storage("touchSchedules"))),
    listSchedules: read(null).pipe(
      Effect.map(({ now, rows }) => rows.map((r) => toScheduleInfo(r, now)).sort((a, b) => compare(a.name, b.name))),
      Effect.mapError(storage("listSchedules"))
    )
  }
}

/**
 * One pass over `names`: each schedule's due ticks enqueued (by `advance`'s
 * compare-and-set), and the time until the earliest next tick.
 */
const passOver = (
  read: Storage.Schedules["scheduleRead"],
  dueOf: (row: ScheduleRow, expected: number, now: number) => Effect.Effect<Ticks.Due | null>,
  advance: (name: string, expected: number, due: Ticks.Due) => Effect.Effect<Array<number> | null, EI>
): Service["tickSchedules"] => (names) =>
  Effect.gen(function*() {
    if (names.length === 0) return { enqueued: 0, nextInMs: null } satisfies TickPass
    const { now, rows } = yield* read(names).pipe(Effect.mapError(storage("tickSchedules")))
    let enqueued = 0
    let earliest: number | null = null
    for (const row of rows) {
      let next = num(row.next_tick)
      if (next <= now) {
        const due = yield* dueOf(row, next, now)
        if (due === null) continue
        const items = yield* advance(row.name!, next, due)
        enqueued += items?.length ?? 0
        // Lost to another pool: it moved next_tick, but maybe not as far (it
        // read an earlier now): report it due, so the caller reads it again.
        next = items === null ? now : due.next
      }
      earliest = earliest === null ? next : Math.min(earliest, next)
    }
    return { enqueued, nextInMs: earliest === null ? null : earliest - now } satisfies TickPass
  })

const fieldsOf = (d: Declaration): ScheduleFields => ({
  name: d.name, kind: d.kind, cron: d.cron, tz: d.tz, payload: d.payloadJson, missed: d.missed
})

/**
 * A pool's declaration (see `Service.declareSchedule`): added with its first
 * tick after now; or, as stored, with the missed ticks enqueued under its mode
 * when no pool touched it for 15 s; or with a changed expression or zone, from
 * the new expression's next tick (the old one's due ticks are not enqueued:
 * they belong to a schedule nobody declares any more). By compare-and-set on
 * next_tick and declared_at, retried when another pool wrote in between.
 */
const declare = (
  store: Pick<Storage.Storage, "scheduleRead" | "scheduleInsert" | "scheduleRedeclare" | "transaction">,
  insertTicks: (name: string, kind: string, payload: string, ticks: ReadonlyArray<number>) => Effect.Effect<Array<number>, EI>,
  declaration: Declaration
): Effect.Effect<DeclareOutcome, EI> =>
  Effect.gen(function*() {
    // Recurring.check parsed it already; a declaration made by hand may not have been.
    const parsedCron = cronOf(declaration.cron, declaration.tz)
    if (Either.isLeft(parsedCron)) {
      return yield* new InvalidInput({ field: "schedule", reason: `${declaration.name}: cron: ${parsedCron.left}` })
    }
    const cron = parsedCron.right
    const fields = fieldsOf(declaration)
    for (let round = 0; round < DECLARE_ROUNDS; round++) {
      const { now, rows } = yield* store.scheduleRead([declaration.name]).pipe(Effect.mapError(storage("declareSchedule")))
      const row = rows[0]
      if (row === undefined) {
        const added = yield* store.scheduleInsert(fields, Ticks.firstAfter(cron, now)).pipe(Effect.mapError(storage("declareSchedule")))
        if (added) return { declared: "new", missed: [] } satisfies DeclareOutcome
        continue
      }
      const changed = row.cron !== declaration.cron || row.tz !== declaration.tz
      const due: Ticks.Due = changed
        ? { ticks: [], next: Ticks.firstAfter(cron, now) }
        : isStale(row, now)
        ? Ticks.missed(declaration.missed, cron, num(row.next_tick), now)
        : { ticks: [], next: num(row.next_tick) }
      const expected = { nextTick: num(row.next_tick), declaredAt: num(row.declared_at) }
      const missed = yield* store.transaction(Effect.gen(function*() {
        const won = yield* store.scheduleRedeclare(fields, due.next, due.ticks[due.ticks.length - 1] ?? null, expected)
          .pipe(Effect.mapError(storage("declareSchedule")))
        if (won === null) return null
        return yield* insertTicks(declaration.name, declaration.kind, declaration.payloadJson, due.ticks)
      })).pipe(Effect.mapError((e) => (e._tag === "SqlError" ? storage("declareSchedule")(e) : e)))
      if (missed !== null) return { declared: changed ? "changed" : "kept", missed } satisfies DeclareOutcome
    }
    return yield* new StorageError({
      operation: "declareSchedule",
      cause: new Error(`schedule ${declaration.name}: other pools kept changing it; try again`)
    })
  })
