/**
 * The items area: adding items (and finding the waiting ones an enqueue's
 * keyed rows were deduplicated to, replacing them, finding the running ones
 * a "replaceRunning" enqueue cancels), reading them, cancelling them, making
 * scheduled ones due now, and when the next becomes due.
 * Each member is one operation, in internal/sql/<member>.ts: its texts for both
 * dialects, their parameters and the decoding of their rows; its type there
 * says what it does. Adding one: its file, its two lines here (below), the
 * store part that calls it.
 */
import type { Db } from "../sql/db.js"
import * as ItemInsertMany from "../sql/itemInsertMany.js"
import * as ItemFindWaiting from "../sql/itemFindWaiting.js"
import * as ItemReplaceWaiting from "../sql/itemReplaceWaiting.js"
import * as ItemFindRunning from "../sql/itemFindRunning.js"
import * as ItemGet from "../sql/itemGet.js"
import * as ItemGetMany from "../sql/itemGetMany.js"
import * as ItemCancelMany from "../sql/itemCancelMany.js"
import * as ItemRunNow from "../sql/itemRunNow.js"
import * as ItemNextDue from "../sql/itemNextDue.js"

/** The items operations. */
export interface Items {
  readonly itemInsertMany: ItemInsertMany.ItemInsertMany
  readonly itemFindWaiting: ItemFindWaiting.ItemFindWaiting
  readonly itemReplaceWaiting: ItemReplaceWaiting.ItemReplaceWaiting
  readonly itemFindRunning: ItemFindRunning.ItemFindRunning
  readonly itemGet: ItemGet.ItemGet
  readonly itemGetMany: ItemGetMany.ItemGetMany
  readonly itemCancelMany: ItemCancelMany.ItemCancelMany
  readonly itemRunNow: ItemRunNow.ItemRunNow
  readonly itemNextDue: ItemNextDue.ItemNextDue
}

/** The items operations of `db`'s dialect. */
export const make = (db: Db): Items => ({
  itemInsertMany: ItemInsertMany.make(db),
  itemFindWaiting: ItemFindWaiting.make(db),
  itemReplaceWaiting: ItemReplaceWaiting.make(db),
  itemFindRunning: ItemFindRunning.make(db),
  itemGet: ItemGet.make(db),
  itemGetMany: ItemGetMany.make(db),
  itemCancelMany: ItemCancelMany.make(db),
  itemRunNow: ItemRunNow.make(db),
  itemNextDue: ItemNextDue.make(db)
})
