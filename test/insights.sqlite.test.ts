import { afterAll, describe } from "@effect/vitest"
import { insightsConformance } from "./conformance/insights.js"
import { sqliteBackend } from "./support/db.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())
describe("the read model on SQLite", () => insightsConformance(backend))
