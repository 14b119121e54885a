/**
 * Kill behind PgBouncer: the kill scenario's drive (kill.ts) with every
 * `docket worker` on a transaction-pooling PgBouncer of the test's own
 * (test/support/pgbouncer.ts) and its LISTEN connection on the database
 * directly (`--listen-database`), as docs/scaling.md says to run them. A
 * SIGKILLed worker's transactions end with its client connection to the
 * pooler, which closes their server connections (the server rolls them
 * back), and the other workers' statements go on over the pooler's other
 * server connections. The kill rules hold as they do on direct connections.
 */
import { describe, it } from "vitest"
import { pgAvailable } from "../support/db.js"
import { pgbouncerAvailable, startPgBouncer } from "../support/pgbouncer.js"
import { expectKillRules, judgeKills, runKillDrive } from "./kill.js"
import { report, scaled } from "./support.js"

export const pooledKillScenario = () =>
  describe.skipIf(!pgAvailable || !pgbouncerAvailable)("kill behind PgBouncer: transaction pooling (PostgreSQL)", () => {
    it("runs every job at least once; a duplicate only after a kill, and within lease + poll of it", async () => {
      const bouncer = await startPgBouncer("transaction")
      try {
        const run = await runKillDrive({
          jobs: scaled(1500, 100),
          worker: (url) => ({ database: bouncer.through(url), args: ["--listen-database", url] })
        })
        const verdict = judgeKills(run)
        report("kill (PgBouncer, transaction pooling)", verdict.figures)
        expectKillRules(run, verdict)
      } finally {
        await bouncer.stop()
      }
    }, 360_000)
  })
