/**
 * The insights area: the read model of a dashboard and of /metrics, and
 * who holds back a PostgreSQL database's xmin horizon.
 * Each member is one operation, in internal/sql/<member>.ts: its texts for both
 * dialects, their parameters and the decoding of their rows; its type there
 * says what it does. Adding one: its file, its two lines here (below), the
 * store part that calls it.
 */
import type { Db } from "../sql/db.js"
import * as InsightStats from "../sql/insightStats.js"
import * as InsightOldestDue from "../sql/insightOldestDue.js"
import * as InsightGroupsDue from "../sql/insightGroupsDue.js"
import * as InsightFinishedPerMinute from "../sql/insightFinishedPerMinute.js"
import * as InsightRetriedPerMinute from "../sql/insightRetriedPerMinute.js"
import * as InsightTotals from "../sql/insightTotals.js"
import * as InsightSearch from "../sql/insightSearch.js"
import * as InsightHorizon from "../sql/insightHorizon.js"
import * as GroupList from "../sql/groupList.js"

/** The insights operations. */
export interface Insights {
  readonly insightStats: InsightStats.InsightStats
  readonly insightOldestDue: InsightOldestDue.InsightOldestDue
  readonly insightGroupsDue: InsightGroupsDue.InsightGroupsDue
  readonly insightFinishedPerMinute: InsightFinishedPerMinute.InsightFinishedPerMinute
  readonly insightRetriedPerMinute: InsightRetriedPerMinute.InsightRetriedPerMinute
  readonly insightTotals: InsightTotals.InsightTotals
  readonly insightSearch: InsightSearch.InsightSearch
  readonly insightHorizon: InsightHorizon.InsightHorizon
  readonly groupList: GroupList.GroupList
}

/** The insights operations of `db`'s dialect. */
export const make = (db: Db): Insights => ({
  insightStats: InsightStats.make(db),
  insightOldestDue: InsightOldestDue.make(db),
  insightGroupsDue: InsightGroupsDue.make(db),
  insightFinishedPerMinute: InsightFinishedPerMinute.make(db),
  insightRetriedPerMinute: InsightRetriedPerMinute.make(db),
  insightTotals: InsightTotals.make(db),
  insightSearch: InsightSearch.make(db),
  insightHorizon: InsightHorizon.make(db),
  groupList: GroupList.make(db)
})
