import { afterAll, describe } from "@effect/vitest"
import { workersConformance } from "./conformance/workers.js"
import { sqliteBackend } from "./support/db.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())
describe("live workers on SQLite", () => workersConformance(backend))
