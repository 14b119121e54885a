/**
 * The reliability suite (docs/reliability.md): each scenario in turn, in one
 * file so that the heavy ones never overlap; every scenario prints its figures
 * as `RELIABILITY:` lines, and the summary is printed again at the end.
 *
 * RELIABILITY_SCALE (default 1) multiplies the job counts.
 */
import { afterAll } from "vitest"
import { blockingHandlerScenario } from "./blockingHandler.js"
import { clockSkewScenario } from "./clockSkew.js"
import { connectionsScenario } from "./connections.js"
import { controlScenario } from "./control.js"
import { diskFullScenario } from "./diskFull.js"
import { failoverScenario } from "./failover.js"
import { groupFairnessScenario } from "./groupFairness.js"
import { groupModelScenario } from "./groupModel.js"
import { groupsScenario } from "./groups.js"
import { hostileScenario } from "./hostile.js"
import { killScenario } from "./kill.js"
import { longJobsScenario } from "./longJobs.js"
import { modelScenario } from "./model.js"
import { partitionScenario } from "./partition.js"
import { poisonScenario } from "./poison.js"
import { pooledKillScenario } from "./pooled.js"
import { recurringScenario } from "./recurring.js"
import { restartScenario } from "./restart.js"
import { slowDatabaseScenario } from "./slowDatabase.js"
import { rollingScenario } from "./rolling.js"
import { soakScenario } from "./soak.js"
import { sqliteKillScenario } from "./sqliteKill.js"
import { printSummary } from "./support.js"
import { transactionalKillScenario } from "./transactional.js"
import { workflowKillScenario } from "./workflowKill.js"

afterAll(() => printSummary())

killScenario()
pooledKillScenario()
rollingScenario()
restartScenario()
sqliteKillScenario()
diskFullScenario()
clockSkewScenario()
longJobsScenario()
blockingHandlerScenario()
modelScenario()
hostileScenario()
controlScenario()
recurringScenario()
poisonScenario()
connectionsScenario()
partitionScenario()
failoverScenario()
slowDatabaseScenario()
soakScenario()
workflowKillScenario()
transactionalKillScenario()
groupsScenario()
groupFairnessScenario()
groupModelScenario()
