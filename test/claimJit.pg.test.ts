/**
 * The claim is never JIT-compiled (migrations/pg/0010_claim_without_jit.sql):
 * with a big backlog the planner's estimate passes jit_above_cost and a
 * server with JIT would compile the claim on every execution (bench W6: over
 * a second per claim at 1M + 1M rows). Seen through auto_explain, whose plans
 * of the statements inside the claim functions come to this session as
 * notices: with every statement's cost above the JIT threshold (the session
 * sets it to 0), a plain query is compiled ("JIT:" in its plan) and the
 * claim's statements are not.
 */
import { Effect, ManagedRuntime } from "effect"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import * as Docket from "../src/Docket.js"
import * as QueueRepo from "../src/QueueRepo.js"
import { freshPgDatabase, IN_CI, pgAvailable } from "./support/db.js"

const cleanups: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

describe.skipIf(!pgAvailable)("the claim without JIT (PostgreSQL)", () => {
  it("the claim functions carry jit=off, and their statements are not compiled when every other one is", async () => {
    const db = await freshPgDatabase()
    cleanups.push(db.drop)
    const runtime = ManagedRuntime.make(Docket.layerClient(db.url))
    cleanups.push(() => runtime.dispose())
    await runtime.runPromise(
      Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueueMany([{ kind: "jit.probe", payload: { n: 1 } }, { kind: "jit.probe", payload: { n: 2 } }]))
    )
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    cleanups.push(() => client.end())

    const { rows: config } = await client.query<{ proname: string; proconfig: Array<string> | null }>(
      "SELECT proname, proconfig FROM pg_proc WHERE proname IN ('docket_claim_from', 'docket_claim') AND pronargs = 5 ORDER BY proname"
    )
    expect(config.map((r) => [r.proname, r.proconfig?.includes("jit=off")])).toEqual([
      ["docket_claim", true],
      ["docket_claim_from", true]
    ])

    const { rows: [{ available }] } = await client.query<{ available: boolean }>("SELECT pg_jit_available() AS available")
    // Without LLVM in the server there is no JIT to turn off, and the plans
    // below cannot show it: CI's server has it (there this is a failure).
    if (!available) {
      expect(IN_CI, "this PostgreSQL has no JIT (pg_jit_available() is false): the plans cannot show it").toBe(false)
      console.warn("claimJit: this PostgreSQL has no JIT; only the functions' settings were checked")
      return
    }

    const notices: Array<string> = []
    client.on("notice", (notice) => notices.push(notice.message ?? ""))
    await client.query("LOAD 'auto_explain'")
    for (const set of [
      "auto_explain.log_min_duration = 0",
      "auto_explain.log_nested_statements = on",
      "auto_explain.log_analyze = on",
      "auto_explain.log_level = notice",
      "jit = on",
      "jit_above_cost = 0"
    ]) await client.query(`SET ${set}`)

    // The control: a plain query is compiled under these settings.
    await client.query("SELECT count(*) FROM docket_items WHERE kind = 'jit.probe'")
    expect(notices.some((n) => /JIT:/.test(n)), notices.join("\n---\n")).toBe(true)

    notices.length = 0
    const { rows: claimed } = await client.query(
      "SELECT id FROM docket_claim($1::text, $2::int, $3::bigint, $4::text[], $5::int)",
      ["jit-test", 10, 30_000, ["jit.probe"], 10]
    )
    expect(claimed).toHaveLength(2)
    // The plans of the claim's own statements (nested ones name the claim's CTEs).
    const inner = notices.filter((n) => /docket_items i/.test(n) && /Query Text/.test(n))
    expect(inner.length, notices.join("\n---\n")).toBeGreaterThan(0)
    for (const plan of inner) expect(plan).not.toMatch(/JIT:/)
  })
})
