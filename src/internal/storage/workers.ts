/**
 * The workers area: the live-workers table (docket_workers).
 * Each member is one operation, in internal/sql/<member>.ts: its texts for both
 * dialects, their parameters and the decoding of their rows; its type there
 * says what it does. Adding one: its file, its two lines here (below), the
 * store part that calls it.
 */
import type { Db } from "../sql/db.js"
import * as WorkerHeartbeat from "../sql/workerHeartbeat.js"
import * as WorkerRemove from "../sql/workerRemove.js"
import * as WorkerPrune from "../sql/workerPrune.js"
import * as WorkerList from "../sql/workerList.js"

/** The workers operations. */
export interface Workers {
  readonly workerHeartbeat: WorkerHeartbeat.WorkerHeartbeat
  readonly workerRemove: WorkerRemove.WorkerRemove
  readonly workerPrune: WorkerPrune.WorkerPrune
  readonly workerList: WorkerList.WorkerList
}

/** The workers operations of `db`'s dialect. */
export const make = (db: Db): Workers => ({
  workerHeartbeat: WorkerHeartbeat.make(db),
  workerRemove: WorkerRemove.make(db),
  workerPrune: WorkerPrune.make(db),
  workerList: WorkerList.make(db)
})
