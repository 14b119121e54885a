/** The differential suite (suite.ts) and the control suite (control.ts) on SQLite files. */
import { afterAll } from "@effect/vitest"
import * as Workflows from "../../src/Workflows.js"
import { sqliteBackend } from "../support/db.js"
import { controlSuite } from "./control.js"
import { differentialSuite } from "./suite.js"
import { AllLive } from "./workflows.js"

const backend = sqliteBackend()
afterAll(() => backend.cleanup())

const layer = async () => Workflows.layer({ database: await backend.fresh(), handlers: [], workflows: AllLive, concurrency: 20 })

differentialSuite("SQLite", layer)
controlSuite("SQLite", layer)
