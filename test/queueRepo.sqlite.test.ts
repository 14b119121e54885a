import { afterAll, describe } from "@effect/vitest"
import { sqliteBackend } from "./support/db.js"
import { queueRepoConformance } from "./conformance/queueRepo.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())
describe("QueueRepo on SQLite", () => queueRepoConformance(backend))
