import { afterAll, describe } from "@effect/vitest"
import { runtimeSuite } from "./suite.js"
import { pgAvailable, pgBackend } from "../../support/db.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())
describe.skipIf(!pgAvailable)("runtime on PostgreSQL", () => runtimeSuite(backend))
