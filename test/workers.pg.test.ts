import { afterAll, describe } from "@effect/vitest"
import { workersConformance } from "./conformance/workers.js"
import { pgAvailable, pgBackend } from "./support/db.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())
describe.skipIf(!pgAvailable)("live workers on PostgreSQL", () => workersConformance(backend))
