/**
 * The shared store suite: QueueRepo's every operation, written once by area
 * and run against every backend (test/store/sqlite.test.ts, test/store/pg.test.ts).
 * The read model (insights.ts) and the live workers (workers.ts) are registered
 * by the entries under describes of their own.
 *
 * Rules: real databases only; time is moved by editing rows (setRow,
 * expireLease, makeDue), never by sleeping; every test checks what is stored
 * (get, counts), not only what an operation returned.
 */
import type { Backend } from "../support/db.js"
import { attemptsSuite } from "./attempts.js"
import { cancelSuite } from "./cancel.js"
import { claimsSuite } from "./claims.js"
import { deadSuite } from "./dead.js"
import { errorsSuite } from "./errors.js"
import { groupListSuite } from "./groupList.js"
import { groupsSuite } from "./groups.js"
import { historySuite } from "./history.js"
import { itemsSuite } from "./items.js"
import { keyModesSuite } from "./keyModes.js"
import { kindsSuite } from "./kinds.js"
import { migrationsSuite } from "./migrations.js"
import { schedulesSuite } from "./schedules.js"
import { snoozeSuite } from "./snooze.js"
import { upgradeSuite } from "./upgrade.js"

/**
 * Registers every shared store test for a backend; the migrations and the
 * upgrades, which start from an empty database and migrate it themselves,
 * on `empty` (the PostgreSQL suite runs the rest as a least-privileged role
 * on a database its owner migrated: test/store/pg.test.ts).
 */
export const storeSuite = (backend: Backend, empty: Backend = backend) => {
  claimsSuite(backend)
  itemsSuite(backend)
  deadSuite(backend)
  errorsSuite(backend)
  migrationsSuite(empty)
  attemptsSuite(backend)
  kindsSuite(backend)
  groupsSuite(backend)
  groupListSuite(backend)
  snoozeSuite(backend)
  cancelSuite(backend)
  keyModesSuite(backend)
  historySuite(backend)
  schedulesSuite(backend)
  upgradeSuite(empty)
}
