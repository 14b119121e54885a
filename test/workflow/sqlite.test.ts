/** The differential suite (suite.ts) on a SQLite file. */
import { afterAll } from "@effect/vitest"
import * as Workflows from "../../src/Workflows.js"
import { sqliteBackend } from "../support/db.js"
import { differentialSuite } from "./suite.js"
import { AllLive } from "./workflows.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())

differentialSuite("SQLite", async () =>
  Workflows.layer({ database: await backend.fresh(), handlers: [], workflows: AllLive, concurrency: 20 }))
