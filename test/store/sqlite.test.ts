/**
 * The store on SQLite: the shared suite by area (test/store/<area>.ts), the
 * read model and the live workers, and SQLite's own tests (test/store/sqlite/).
 */
import { afterAll, describe } from "@effect/vitest"
import { sqliteBackend } from "../support/db.js"
import { insightsSuite } from "./insights.js"
import { sqliteClaimsTests } from "./sqlite/claims.js"
import { storeSuite } from "./suite.js"
import { workersSuite } from "./workers.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())
describe("QueueRepo on SQLite", () => storeSuite(backend))
describe("the read model on SQLite", () => insightsSuite(backend))
describe("live workers on SQLite", () => workersSuite(backend))
sqliteClaimsTests(backend)
