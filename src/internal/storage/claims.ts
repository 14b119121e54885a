/**
 * The claims area: leasing due items, and every fenced change the holder of
 * a claim makes after it (its outcome, or a renewed lease).
 * Each member is one operation, in internal/sql/<member>.ts: its texts for both
 * dialects, their parameters and the decoding of their rows; its type there
 * says what it does. Adding one: its file, its two lines here (below), the
 * store part that calls it.
 */
import type { Db } from "../sql/db.js"
import * as ClaimAcquire from "../sql/claimAcquire.js"
import * as ClaimComplete from "../sql/claimComplete.js"
import * as ClaimFail from "../sql/claimFail.js"
import * as ClaimRelease from "../sql/claimRelease.js"
import * as ClaimSnooze from "../sql/claimSnooze.js"
import * as ClaimExtend from "../sql/claimExtend.js"

/** The claims operations. */
export interface Claims {
  readonly claimAcquire: ClaimAcquire.ClaimAcquire
  readonly claimComplete: ClaimComplete.ClaimComplete
  readonly claimFail: ClaimFail.ClaimFail
  readonly claimRelease: ClaimRelease.ClaimRelease
  readonly claimSnooze: ClaimSnooze.ClaimSnooze
  readonly claimExtend: ClaimExtend.ClaimExtend
}

/** The claims operations of `db`'s dialect. */
export const make = (db: Db): Claims => ({
  claimAcquire: ClaimAcquire.make(db),
  claimComplete: ClaimComplete.make(db),
  claimFail: ClaimFail.make(db),
  claimRelease: ClaimRelease.make(db),
  claimSnooze: ClaimSnooze.make(db),
  claimExtend: ClaimExtend.make(db)
})
