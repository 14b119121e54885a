/**
 * The store on PostgreSQL: the shared suite by area (test/store/<area>.ts), the
 * read model and the live workers, and PostgreSQL's own tests (test/store/pg/).
 */
import { afterAll, describe } from "@effect/vitest"
import { pgAvailable, pgBackend } from "../support/db.js"
import { insightsSuite } from "./insights.js"
import { pgCancelTests } from "./pg/cancel.js"
import { pgClaimPlanTests, pgClaimsTests } from "./pg/claims.js"
import { pgConnectionsTests } from "./pg/connections.js"
import { pgDeadTests } from "./pg/dead.js"
import { pgHeldHorizonTests } from "./pg/heldHorizon.js"
import { pgHistoryTests } from "./pg/history.js"
import { pgItemsTests } from "./pg/items.js"
import { storeSuite } from "./suite.js"
import { workersSuite } from "./workers.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())

describe.skipIf(!pgAvailable)("QueueRepo on PostgreSQL", () => {
  storeSuite(backend)

  describe("PostgreSQL only", () => {
    pgItemsTests(backend)
    pgCancelTests(backend)
    pgDeadTests(backend)
    pgHistoryTests(backend)
    pgConnectionsTests(backend)
    pgClaimsTests(backend)
    pgHeldHorizonTests(backend)
  })
})
describe.skipIf(!pgAvailable)("the read model on PostgreSQL", () => insightsSuite(backend))
describe.skipIf(!pgAvailable)("live workers on PostgreSQL", () => workersSuite(backend))
pgClaimPlanTests()
