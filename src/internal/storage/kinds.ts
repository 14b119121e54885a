/**
 * The kinds area: kinds, and groups of a kind, as things a person operates
 * (docket_kinds, docket_groups).
 * Each member is one operation, in internal/sql/<member>.ts: its texts for both
 * dialects, their parameters and the decoding of their rows; its type there
 * says what it does. Adding one: its file, its two lines here (below), the
 * store part that calls it.
 */
import type { Db } from "../sql/db.js"
import * as KindList from "../sql/kindList.js"
import * as KindSetPaused from "../sql/kindSetPaused.js"
import * as KindSetLimits from "../sql/kindSetLimits.js"
import * as KindSetGroups from "../sql/kindSetGroups.js"
import * as GroupSetPaused from "../sql/groupSetPaused.js"
import * as KindSetGroupLimits from "../sql/kindSetGroupLimits.js"

/** The kinds operations. */
export interface Kinds {
  readonly kindList: KindList.KindList
  readonly kindSetPaused: KindSetPaused.KindSetPaused
  readonly kindSetLimits: KindSetLimits.KindSetLimits
  readonly kindSetGroups: KindSetGroups.KindSetGroups
  readonly groupSetPaused: GroupSetPaused.GroupSetPaused
  readonly kindSetGroupLimits: KindSetGroupLimits.KindSetGroupLimits
}

/** The kinds operations of `db`'s dialect. */
export const make = (db: Db): Kinds => ({
  kindList: KindList.make(db),
  kindSetPaused: KindSetPaused.make(db),
  kindSetLimits: KindSetLimits.make(db),
  kindSetGroups: KindSetGroups.make(db),
  groupSetPaused: GroupSetPaused.make(db),
  kindSetGroupLimits: KindSetGroupLimits.make(db)
})
