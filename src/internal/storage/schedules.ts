/**
 * The schedules area: the recurring schedules (docket_schedules).
 * Each member is one operation, in internal/sql/<member>.ts: its texts for both
 * dialects, their parameters and the decoding of their rows; its type there
 * says what it does. Adding one: its file, its two lines here (below), the
 * store part that calls it.
 */
import type { Db } from "../sql/db.js"
import * as ScheduleRead from "../sql/scheduleRead.js"
import * as ScheduleInsert from "../sql/scheduleInsert.js"
import * as ScheduleAdvance from "../sql/scheduleAdvance.js"
import * as ScheduleRedeclare from "../sql/scheduleRedeclare.js"
import * as ScheduleSetLastItem from "../sql/scheduleSetLastItem.js"
import * as ScheduleTouch from "../sql/scheduleTouch.js"

/** The schedules operations. */
export interface Schedules {
  readonly scheduleRead: ScheduleRead.ScheduleRead
  readonly scheduleInsert: ScheduleInsert.ScheduleInsert
  readonly scheduleAdvance: ScheduleAdvance.ScheduleAdvance
  readonly scheduleRedeclare: ScheduleRedeclare.ScheduleRedeclare
  readonly scheduleSetLastItem: ScheduleSetLastItem.ScheduleSetLastItem
  readonly scheduleTouch: ScheduleTouch.ScheduleTouch
}

/** The schedules operations of `db`'s dialect. */
export const make = (db: Db): Schedules => ({
  scheduleRead: ScheduleRead.make(db),
  scheduleInsert: ScheduleInsert.make(db),
  scheduleAdvance: ScheduleAdvance.make(db),
  scheduleRedeclare: ScheduleRedeclare.make(db),
  scheduleSetLastItem: ScheduleSetLastItem.make(db),
  scheduleTouch: ScheduleTouch.make(db)
})
