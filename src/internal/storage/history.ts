/**
 * The history area: finished items listed a page at a time, pruned when
 * their retention has passed (and the retry counts when their day has), and
 * the dead-item tools.
 * Each member is one operation, in internal/sql/<member>.ts: its texts for both
 * dialects, their parameters and the decoding of their rows; its type there
 * says what it does. Adding one: its file, its two lines here (below), the
 * store part that calls it.
 */
import type { Db } from "../sql/db.js"
import * as HistoryList from "../sql/historyList.js"
import * as HistoryPrune from "../sql/historyPrune.js"
import * as HistoryPruneMinuteCounts from "../sql/historyPruneMinuteCounts.js"
import * as DeadList from "../sql/deadList.js"
import * as DeadRetry from "../sql/deadRetry.js"
import * as DeadDelete from "../sql/deadDelete.js"

/** The history operations. */
export interface History {
  readonly historyList: HistoryList.HistoryList
  readonly historyPrune: HistoryPrune.HistoryPrune
  readonly historyPruneMinuteCounts: HistoryPruneMinuteCounts.HistoryPruneMinuteCounts
  readonly deadList: DeadList.DeadList
  readonly deadRetry: DeadRetry.DeadRetry
  readonly deadDelete: DeadDelete.DeadDelete
}

/** The history operations of `db`'s dialect. */
export const make = (db: Db): History => ({
  historyList: HistoryList.make(db),
  historyPrune: HistoryPrune.make(db),
  historyPruneMinuteCounts: HistoryPruneMinuteCounts.make(db),
  deadList: DeadList.make(db),
  deadRetry: DeadRetry.make(db),
  deadDelete: DeadDelete.make(db)
})
