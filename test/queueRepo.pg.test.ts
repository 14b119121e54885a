import { afterAll, describe } from "@effect/vitest"
import { pgAvailable, pgBackend } from "./support/db.js"
import { queueRepoConformance } from "./conformance/queueRepo.js"

const backend = pgBackend()
afterAll(() => backend.cleanup())
describe.skipIf(!pgAvailable)("QueueRepo on PostgreSQL", () => queueRepoConformance(backend))
