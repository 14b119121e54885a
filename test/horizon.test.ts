/**
 * The xmin horizon held back, on every surface, on a PostgreSQL cluster of
 * the test's own (test/support/cluster.ts: the shared server has
 * max_prepared_transactions = 0 and no standby): a primary with prepared
 * transactions allowed, and a streaming standby on the physical slot
 * "standby1" with hot_standby_feedback, its feedback sent every second.
 *
 * For each kind of holder, held for real past the threshold (500 ms, or
 * 50 transactions for the slot, which records no time):
 * - a session: a REPEATABLE READ transaction that has read, held open on
 *   its own connection (application "nightly-report");
 * - a prepared transaction, left prepared;
 * - the slot: the standby's own REPEATABLE READ transaction, whose snapshot
 *   the standby's feedback pins as the slot's xmin on the primary, while the
 *   primary runs 100 transactions.
 * A worker pool warns within one period (2 s here; a little slack for a
 * loaded machine) naming it, once per period, and says once when it ended;
 * /metrics and the overview page name it and drop it once it ended (within
 * the overview's 2 s cache); `docket stats` names it, and not after.
 */
import { Effect, Layer, Schema } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Handler, QueueRepo, Worker } from "../src/index.js"
import { type Cluster, clusterAvailable, privateCluster, privateStandby } from "./support/cluster.js"
import { docket, docketAll } from "./support/cli.js"
import { type Served, serve } from "./support/dashboard.js"
import { repoLayer } from "./support/db.js"
import { until, withLogLines } from "./support/worker.js"

const THRESHOLD: QueueRepo.HorizonThreshold = { age: "500 millis", transactions: 50 }
const EVERY_MS = 2_000
/** What a loaded 2-core machine may add to a period (a check's statement, a log line's way out). */
const SLACK_MS = 3_000
const STATS_FLAGS = ["--horizon-age", "500ms", "--horizon-transactions", "50"]

/** A hold of the horizon, and its end. */
interface Hold {
  readonly end: () => Promise<void>
}

/** What each surface must say of one holder. */
interface Expected {
  /** How the warning, `docket stats` and the overview's table name it. */
  readonly name: string
  /** The rest of its description in the warning and `docket stats`. */
  readonly facts: RegExp
  /** Its series in /metrics. */
  readonly metric: RegExp
}

const Noop = Handler.make("noop", { payload: Schema.Unknown, run: () => Effect.void })

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const fetchText = (url: string) => Effect.promise(() => fetch(url).then((r) => r.text()))

/** A session of its own, named `applicationName`, on `url`. */
const connect = async (url: string, applicationName: string) => {
  const client = new pg.Client({ connectionString: url, application_name: applicationName })
  client.on("error", () => {})
  await client.connect()
  return client
}

/** A REPEATABLE READ transaction on `url` that has read (its snapshot taken), held until `end`. */
const snapshotHeld = async (url: string, applicationName: string): Promise<Hold & { readonly pid: number }> => {
  const client = await connect(url, applicationName)
  const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid
  await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ")
  await client.query("SELECT count(*) FROM docket_items")
  return { pid, end: () => client.query("COMMIT").then(() => client.end()) }
}

describe.skipIf(!clusterAvailable)("the xmin horizon held back, on a cluster of the test's own", () => {
  let primary: Cluster | undefined
  let standby: Cluster | undefined
  let dashboard: Served | undefined
  let url = ""

  beforeAll(async () => {
    const made = await privateCluster({ settings: { max_prepared_transactions: 10 } })
    primary = made
    await made.query((c) => c.query("CREATE DATABASE queue"))
    url = made.url("queue")
    // The dashboard's repository migrates the queue's database.
    dashboard = await serve(url, { horizon: THRESHOLD })
    standby = await privateStandby(made, "standby1", { hot_standby_feedback: "on", wal_receiver_status_interval: "1s" })
  }, 120_000)

  afterAll(async () => {
    await dashboard?.dispose()
    await standby?.destroy()
    await primary?.destroy()
  })

  /** Every surface while `hold` holds the horizon past the threshold, and after it ended. */
  const everySurface = (hold: () => Promise<Hold>, expected: () => Expected) =>
    withLogLines((lines) =>
      Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const held = yield* Effect.promise(hold)
        const { facts, metric, name } = expected()
        // Past the threshold from the moment the database names it.
        yield* until(repo.horizon(THRESHOLD), (r) => r._tag === "Some" && r.value.holders.length > 0, "the hold past the threshold")
        const pastAt = Date.now()
        const named = (line: string) => line.startsWith("WARN: docket: the xmin horizon of the queue's database is held back") &&
          line.includes(name)
        yield* until(Effect.sync(() => lines.filter(named)), (l) => l.length > 0, `a warning naming ${name}`)
        expect(Date.now() - pastAt).toBeLessThan(EVERY_MS + SLACK_MS)
        expect(lines.find(named)).toMatch(new RegExp(`held back past 500ms or 50 transactions by ${escape(name)} \\(${facts.source}\\)`))

        const metrics = yield* until(fetchText(`${dashboard!.root}/metrics`), (t) => metric.test(t), "the holder's series")
        expect(metrics).toMatch(/^docket_horizon_held 1$/m)
        const page = yield* fetchText(`${dashboard!.root}/`)
        expect(page).toContain("<h2>Vacuum held back</h2>")
        expect(page).toContain(`<td>${name.replace(/"/g, "&quot;")}</td>`)
        const [text, json] = yield* Effect.promise(() =>
          docketAll([["stats", "--database", url, ...STATS_FLAGS], ["stats", "--json", "--database", url, ...STATS_FLAGS]])
        )
        expect(text.stdout).toContain("xmin horizon held back past 500ms or 50 transactions")
        expect(text.stdout).toMatch(new RegExp(`^  ${escape(name)} \\(${facts.source}\\)$`, "m"))
        expect(JSON.parse(json.stdout).horizon).toMatchObject({ ageMs: 500, transactions: 50, holders: [expect.any(Object)] })

        const heldFor = Date.now() - pastAt
        yield* Effect.promise(held.end)
        const ended = (line: string) => line.includes("is no longer held back past 500ms or 50 transactions") && line.includes(name)
        yield* until(Effect.sync(() => lines.filter(ended)), (l) => l.length === 1, "the line saying it ended")
        // One warning per period, not one per claim or heartbeat.
        expect(lines.filter(named).length).toBeLessThanOrEqual(Math.ceil((heldFor + SLACK_MS) / EVERY_MS) + 1)
        const after = yield* until(fetchText(`${dashboard!.root}/metrics`), (t) => /^docket_horizon_held 0$/m.test(t), "no holder")
        expect(after).not.toMatch(metric)
        expect(yield* fetchText(`${dashboard!.root}/`)).not.toContain("Vacuum held back")
        const stats = yield* Effect.promise(() => docket(["stats", "--database", url, ...STATS_FLAGS]))
        expect(stats.stdout).not.toContain("xmin horizon")
        // The end is said once.
        yield* Effect.sleep(EVERY_MS)
        expect(lines.filter(ended)).toHaveLength(1)
      }).pipe(
        // A pool of its own, started under the logger that collects `lines`.
        Effect.provide(
          Worker.layer({ handlers: [Noop], horizon: { ...THRESHOLD, every: EVERY_MS } }).pipe(Layer.provideMerge(repoLayer(url)))
        ),
        Effect.scoped
      )
    ).pipe(Effect.runPromise)

  it("a session: a REPEATABLE READ transaction that has read, held open on its own connection", async () => {
    let pid = 0
    await everySurface(
      async () => {
        const held = await snapshotHeld(url, "nightly-report")
        pid = held.pid
        return held
      },
      () => ({
        name: `session pid ${pid}`,
        facts: /application "nightly-report", user root, idle in transaction, transaction open [^,]+, xmin \d+ \(\d+ transactions? ago\), query "SELECT count\(\*\) FROM docket_items"/,
        metric: new RegExp(
          `^docket_horizon_holder_age_seconds\\{holder="session",pid="${pid}",application="nightly-report",user="root",` +
            `state="idle in transaction"\\} [\\d.]+$`,
          "m"
        )
      })
    )
  })

  it("a prepared transaction, left prepared (max_prepared_transactions set on the cluster)", async () => {
    await everySurface(
      async () => {
        await primary!.query(async (c) => {
          await c.query("BEGIN")
          await c.query("SELECT txid_current()")
          await c.query("PREPARE TRANSACTION 'nightly-export'")
        }, "queue")
        return { end: () => primary!.query((c) => c.query("ROLLBACK PREPARED 'nightly-export'").then(() => undefined), "queue") }
      },
      () => ({
        name: `prepared transaction "nightly-export"`,
        facts: /owner root, prepared \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, [^,]+ ago, xid \d+ \(\d+ transactions? ago\)/,
        metric: /^docket_horizon_holder_age_seconds\{holder="prepared",gid="nightly-export",owner="root"\} [\d.]+$/m
      })
    )
  })

  it("a replication slot: the standby's own REPEATABLE READ transaction pins the slot's xmin through its feedback", async () => {
    await everySurface(
      async () => {
        // Read on the standby: its snapshot's xmin, sent as feedback, is the slot's xmin on the primary.
        const held = await snapshotHeld(standby!.url("queue"), "standby report")
        // 100 transactions on the primary: the pinned xmin falls 100 behind (past 50); unpinned, it would follow within a second.
        await primary!.query(
          (c) => c.query("DO $$ BEGIN FOR i IN 1..100 LOOP PERFORM txid_current(); COMMIT; END LOOP; END $$"),
          "queue"
        )
        return held
      },
      () => ({
        name: `replication slot "standby1"`,
        facts: /physical, active, xmin \d+ \(\d+ transactions ago\), holds back every table/,
        metric: /^docket_horizon_holder_xmin_age\{holder="slot",slot="standby1",slot_type="physical",active="true",holds="every table"\} \d+$/m
      })
    )
  })
})
