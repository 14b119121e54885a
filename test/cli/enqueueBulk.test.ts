/**
 * `docket enqueue --from` at sizes that span many batches (issue 19): the real
 * command as a child process, on a real SQLite file and a real PostgreSQL
 * database. A bad line deep in the file refuses all of it, naming its line,
 * and leaves the queue empty; keys dedupe across batches; every per-line
 * option is stored as given, in any batch.
 */
import { SqlClient } from "@effect/sql"
import { Effect, ManagedRuntime } from "effect"
import { existsSync } from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { QueueRepo as QueueRepoTag } from "../../src/QueueRepo.js"
import { cliBackends, docket, lines, tempDir } from "../support/cli.js"
import { repoLayer } from "../support/db.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const backends = cliBackends(cleanups)
const files = tempDir("docket-from-")
cleanups.push(() => files.remove())

const openDb = (url: string) => {
  const runtime = ManagedRuntime.make(repoLayer(url))
  cleanups.push(() => runtime.dispose())
  return {
    repo: <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) => runtime.runPromise(Effect.flatMap(QueueRepoTag, f)),
    sql: (text: string) =>
      runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text)))
  }
}

const count = async (db: ReturnType<typeof openDb>) => Number((await db.sql("SELECT count(*) AS n FROM docket_items"))[0].n)

/** An NDJSON file of `n` lines, line `i` (1-based) given by `line`. */
const ndjson = (name: string, n: number, line: (i: number) => string) => {
  const out: Array<string> = new Array(n)
  for (let i = 1; i <= n; i++) out[i - 1] = line(i)
  return files.write(name, out.join("\n") + "\n")
}

const LONG = { timeoutMs: 180_000 }

describe.each(backends)("docket enqueue --from on $name", (backend) => {
  it.skipIf(backend.skip)("a bad line at 70,001 of 100,000 refuses the whole file, naming it; nothing is written", async () => {
    const url = await backend.fresh()
    const file = ndjson("bad-deep.ndjson", 100_000, (i) =>
      i === 70_001
        ? `{"kind":"bulk.item","payload":{"n":${i}},"priority":"high"}`
        : `{"kind":"bulk.item","payload":{"n":${i}}}`)
    const refused = await docket(["enqueue", "--from", file, "--database", url], LONG)
    expect(refused.code, refused.stderr).toBe(2)
    expect(lines(refused.stderr)).toEqual([`docket: line 70001: invalid priority: must be an integer from -2147483647 to 2147483647 (got "high")`])
    expect(refused.stdout).toBe("")
    expect(await count(openDb(url))).toBe(0)
  }, 200_000)

  it.skipIf(backend.skip)("a bad line in the first batch is refused before the database is opened", async () => {
    const url = await backend.fresh()
    // CRLF and a lone CR end lines as an editor shows them: the bad line is line 4.
    const file = files.write(
      "bad-early.ndjson",
      `{"kind":"a","payload":1}\r\n{"kind":"a","payload":2}\r\n\r{"kind":"a","payload":3,"paylod":4}\n`
    )
    const refused = await docket(["enqueue", "--from", file, "--database", url])
    expect(refused.code).toBe(2)
    expect(lines(refused.stderr)).toEqual([`docket: line 4: unknown field "paylod"`])
    if (backend.name === "sqlite") expect(existsSync(url)).toBe(false)
    else expect(await count(openDb(url))).toBe(0)
  }, 180_000)

  it.skipIf(backend.skip)("keys dedupe across batches and against a waiting item, counted in the output", async () => {
    const url = await backend.fresh()
    const db = openDb(url)
    const before = await db.repo((repo) => repo.enqueue("bulk.item", { before: true }, { key: "k2" }))
    expect(before._tag).toBe("Enqueued")
    // Even lines carry one of 6,000 keys (k0, k2, ... k11998), each used two or three times,
    // in different batches of 10,000 lines; odd lines carry none.
    const file = ndjson("keyed.ndjson", 25_000, (i) =>
      i % 2 === 0
        ? `{"kind":"bulk.item","payload":{"n":${i}},"key":"k${i % 12_000}"}`
        : `{"kind":"bulk.item","payload":{"n":${i}}}`)
    const added = await docket(["enqueue", "--from", file, "--database", url], LONG)
    expect(added.code, added.stderr).toBe(0)
    expect(added.stdout.trim()).toBe("enqueued 18499 items (6501 deduplicated)")
    expect(await count(db)).toBe(18_500)
    // The first line of each key won: k4 is line 4's, k2 the item from before.
    const k4 = await db.sql("SELECT payload FROM docket_items WHERE dedupe_key = 'k4'")
    expect(k4.map((r) => JSON.parse(String(r.payload)))).toEqual([{ n: 4 }])
    const k2 = await db.sql("SELECT payload FROM docket_items WHERE dedupe_key = 'k2'")
    expect(k2.map((r) => JSON.parse(String(r.payload)))).toEqual([{ before: true }])
  }, 200_000)

  it.skipIf(backend.skip)("every per-line option is stored as given, in a later batch too", async () => {
    const url = await backend.fresh()
    const options: Record<number, string> = {
      9_999: `"priority":-5`,
      10_001: `"priority":7,"maxAttempts":3`,
      10_002: `"delay":"5m"`,
      10_003: `"delay":1500`,
      10_004: `"runAt":"2999-01-01T00:00:00Z"`,
      10_005: `"runAt":32503680000000,"key":"once"`,
      10_006: `"key":null,"priority":null,"maxAttempts":null,"delay":null,"runAt":null`,
      10_007: `"payload":null`
    }
    const file = ndjson("options.ndjson", 12_000, (i) =>
      options[i] === undefined
        ? `{"kind":"bulk.item","payload":{"n":${i}}}`
        : i === 10_007
        ? `{"kind":"bulk.other",${options[i]}}`
        : `{"kind":"bulk.item","payload":{"n":${i}},${options[i]}}`)
    const added = await docket(["enqueue", "--from", file, "--database", url], LONG)
    expect(added.code, added.stderr).toBe(0)
    expect(added.stdout.trim()).toBe("enqueued 12000 items")
    const db = openDb(url)
    const rows = await db.sql(
      `SELECT kind, payload, priority, max_attempts, max_attempts_given, run_at - created_at AS wait, run_at, dedupe_key
       FROM docket_items WHERE id IN (SELECT min(id) + n - 1 FROM docket_items,
         (SELECT 9999 AS n UNION ALL SELECT 10000 UNION ALL SELECT 10001 UNION ALL SELECT 10002 UNION ALL SELECT 10003
          UNION ALL SELECT 10004 UNION ALL SELECT 10005 UNION ALL SELECT 10006 UNION ALL SELECT 10007) ns GROUP BY n)
       ORDER BY id`
    )
    const got = rows.map((r) => ({
      kind: r.kind,
      payload: JSON.parse(String(r.payload)),
      priority: Number(r.priority),
      maxAttempts: Number(r.max_attempts),
      given: r.max_attempts_given === true || r.max_attempts_given === 1,
      wait: Number(r.wait),
      runAt: Number(r.run_at),
      key: r.dedupe_key
    }))
    const plain = { kind: "bulk.item", priority: 0, maxAttempts: 8, given: false, wait: 0, key: null }
    expect(got.map(({ runAt: _, ...rest }) => rest)).toEqual([
      { ...plain, payload: { n: 9999 }, priority: -5 },
      { ...plain, payload: { n: 10000 } },
      { ...plain, payload: { n: 10001 }, priority: 7, maxAttempts: 3, given: true },
      { ...plain, payload: { n: 10002 }, wait: 300_000 },
      { ...plain, payload: { n: 10003 }, wait: 1500 },
      { ...plain, payload: { n: 10004 }, wait: got[5].wait },
      { ...plain, payload: { n: 10005 }, wait: got[6].wait, key: "once" },
      { ...plain, payload: { n: 10006 } },
      { ...plain, kind: "bulk.other", payload: null }
    ])
    expect(got[5].runAt).toBe(Date.parse("2999-01-01T00:00:00Z"))
    expect(got[6].runAt).toBe(32503680000000)
  }, 200_000)
})
