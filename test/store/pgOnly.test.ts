/**
 * The store's PostgreSQL-only tests (test/store/pg/): items, cancels, dead
 * items, history, connections, claims and their plans, groups, the held
 * xmin horizon. Same least-privileged roles and schema as the conformance suite
 * (pg.test.ts).
 */
import { afterAll, describe } from "@effect/vitest"
import { pgAvailable, pgBackend } from "../support/db.js"
import { pgCancelTests } from "./pg/cancel.js"
import { pgClaimPlanTests, pgClaimsTests } from "./pg/claims.js"
import { pgConnectionsTests } from "./pg/connections.js"
import { pgDeadTests } from "./pg/dead.js"
import { pgGroupPlanTests } from "./pg/groupPlans.js"
import { pgGroupsTests } from "./pg/groups.js"
import { pgHeldHorizonTests } from "./pg/heldHorizon.js"
import { pgHistoryTests } from "./pg/history.js"
import { pgItemsTests } from "./pg/items.js"

const backend = pgBackend({ schema: "docket_test" })
afterAll(() => backend.cleanup())

describe.skipIf(!pgAvailable)("QueueRepo on PostgreSQL", () => {
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
pgClaimPlanTests()
pgGroupPlanTests()
