/**
 * The store on PostgreSQL: the shared suite by area (test/store/<area>.ts), the
 * read model and the live workers, and PostgreSQL's own tests (test/store/pg/).
 *
 * Least privilege: every database is reached as a role with only the
 * privileges `docket grants` prints, on a schema of Docket's own that an
 * owner role (no superuser, no CREATE on the database or public) migrated,
 * and neither role has the schema on its search_path (test/support/db.ts,
 * pgBackend): a statement Docket sends with a name unqualified fails. The
 * migrations and upgrades start from empty databases and run as the
 * administrator in public, where the worker runtime, the command and the
 * dashboard suites run too.
 */
import { afterAll, describe } from "@effect/vitest"
import { pgAvailable, pgBackend } from "../support/db.js"
import { insightsSuite } from "./insights.js"
import { pgCancelTests } from "./pg/cancel.js"
import { pgClaimPlanTests, pgClaimsTests } from "./pg/claims.js"
import { pgConnectionsTests } from "./pg/connections.js"
import { pgDeadTests } from "./pg/dead.js"
import { pgGroupsTests } from "./pg/groups.js"
import { pgHeldHorizonTests } from "./pg/heldHorizon.js"
import { pgHistoryTests } from "./pg/history.js"
import { pgItemsTests } from "./pg/items.js"
import { storeSuite } from "./suite.js"
import { workersSuite } from "./workers.js"

const backend = pgBackend({ schema: "docket_test" })
const empty = pgBackend()
afterAll(() => Promise.all([backend.cleanup(), empty.cleanup()]))

describe.skipIf(!pgAvailable)("QueueRepo on PostgreSQL", () => {
  storeSuite(backend, empty)

  describe("PostgreSQL only", () => {
    pgItemsTests(backend)
    pgCancelTests(backend)
    pgDeadTests(backend)
    pgHistoryTests(backend)
    pgConnectionsTests(backend)
    pgClaimsTests(backend)
    pgGroupsTests(backend)
    pgHeldHorizonTests(backend)
  })
})
describe.skipIf(!pgAvailable)("the read model on PostgreSQL", () => insightsSuite(backend))
describe.skipIf(!pgAvailable)("live workers on PostgreSQL", () => workersSuite(backend))
pgClaimPlanTests()
