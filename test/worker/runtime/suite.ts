/**
 * The runtime suite: the worker pool against a real database, written once and
 * run on SQLite and PostgreSQL (test/worker/runtime/sqlite.test.ts, pg.test.ts).
 */
import type { Backend } from "../../support/db.js"
import { cancelRuntimeSuite } from "./cancel.js"
import { groupWakeRuntimeSuite } from "./groupWake.js"
import { historyRuntimeSuite } from "./history.js"
import { outcomesRuntimeSuite } from "./outcomes.js"
import { poolRuntimeSuite } from "./pool.js"
import { snoozeRuntimeSuite } from "./snooze.js"
import { transactionalRuntimeSuite } from "./transactional.js"

/** Registers every runtime test for a backend. */
export const runtimeSuite = (backend: Backend) => {
  outcomesRuntimeSuite(backend)
  poolRuntimeSuite(backend)
  snoozeRuntimeSuite(backend)
  cancelRuntimeSuite(backend)
  historyRuntimeSuite(backend)
  transactionalRuntimeSuite(backend)
  groupWakeRuntimeSuite(backend)
}
