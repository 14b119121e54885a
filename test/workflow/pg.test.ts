/**
 * The differential suite (suite.ts) and the control suite (control.ts) on
 * PostgreSQL, with least privilege: the role has only what `docket grants`
 * prints, on a schema of Docket's own (test/support/db.ts, pgBackend), so the
 * engine's tables are granted and every statement names them qualified.
 */
import { afterAll, describe } from "@effect/vitest"
import * as Workflows from "../../src/Workflows.js"
import { pgAvailable, pgBackend, schemaOf } from "../support/db.js"
import { controlSuite } from "./control.js"
import { differentialSuite } from "./suite.js"
import { AllLive } from "./workflows.js"

const backend = pgBackend({ schema: "docket_wf" })
afterAll(() => backend.cleanup())

const layer = async () => {
  const url = await backend.fresh()
  return Workflows.layer({
    database: url,
    databaseOptions: { schema: schemaOf(url).name },
    handlers: [],
    workflows: AllLive,
    concurrency: 20
  })
}

describe.skipIf(!pgAvailable)("PostgreSQL", () => {
  differentialSuite("PostgreSQL", layer)
  controlSuite("PostgreSQL", layer)
})
