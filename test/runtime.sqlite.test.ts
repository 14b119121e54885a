import { afterAll, describe } from "@effect/vitest"
import { runtimeConformance } from "./conformance/runtime.js"
import { sqliteBackend } from "./support/db.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())
describe("runtime on SQLite", () => runtimeConformance(backend))
