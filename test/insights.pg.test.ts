import { afterAll, describe } from "@effect/vitest"
import { insightsConformance } from "./conformance/insights.js"
import { pgAvailable, pgBackend } from "./support/db.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())
describe.skipIf(!pgAvailable)("the read model on PostgreSQL", () => insightsConformance(backend))
