import { afterAll, describe } from "@effect/vitest"
import { runtimeConformance } from "./conformance/runtime.js"
import { pgAvailable, pgBackend } from "./support/db.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())
describe.skipIf(!pgAvailable)("runtime on PostgreSQL", () => runtimeConformance(backend))
