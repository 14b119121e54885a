/**
 * The store on PostgreSQL: the shared suite by area (test/store/<area>.ts),
 * the read model and the live workers: the conformance suite SQLite passes
 * too (test/store/sqlite.test.ts). PostgreSQL's own tests are in
 * pgOnly.test.ts (test/store/pg/); the Node lines beside the primary one run
 * this file and not those (scripts/ci-node-lines.sh).
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
import { storeSuite } from "./suite.js"
import { workersSuite } from "./workers.js"

const backend = pgBackend({ schema: "docket_test" })
const empty = pgBackend()
afterAll(() => Promise.all([backend.cleanup(), empty.cleanup()]))

describe.skipIf(!pgAvailable)("QueueRepo on PostgreSQL", () => storeSuite(backend, empty))
describe.skipIf(!pgAvailable)("the read model on PostgreSQL", () => insightsSuite(backend))
describe.skipIf(!pgAvailable)("live workers on PostgreSQL", () => workersSuite(backend))
