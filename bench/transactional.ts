/**
 * `npx tsx bench/transactional.ts [--rounds n] [--jobs n]`: what a
 * `transactional` handler costs (issue 36, docs/concepts.md "Transactional
 * handlers"). One pool in this process, 10 slots, drains `--jobs` items
 * whose handler writes one row of the application's own table, in three
 * modes side by side, rounds alternating (A B C A B C ...):
 *
 * - plain: the handler's write commits on its own (autocommit), the item's
 *   completion later in the recorder's batch: at least once;
 * - transactional: the write and the completion in one transaction (the
 *   pool's default cap of 4 such runs at once);
 * - transactional, 8 at once (`transactions: 8`, a pool of 12 connections).
 *
 * Items/s from the first enqueue to the last completion, medians of the
 * rounds; on PostgreSQL (BENCH_PG_URL, default the local server; a fresh
 * database per round) and on a SQLite file.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import * as Docket from "../src/Docket.js"
import * as Handler from "../src/Handler.js"
import * as Worker from "../src/Worker.js"
import { median } from "./lib/stats.js"

const args = process.argv.slice(2)
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const rounds = Number(flag("--rounds") ?? 3)
const jobs = Number(flag("--jobs") ?? 3_000)
const adminUrl = process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres"

interface Mode {
  readonly name: string
  readonly transactional: boolean
  readonly transactions?: number
  readonly maxConnections?: number
}
const MODES: ReadonlyArray<Mode> = [
  { name: "plain", transactional: false },
  { name: "transactional (4 at once)", transactional: true },
  { name: "transactional (8 at once)", transactional: true, transactions: 8, maxConnections: 12 }
]

const drain = (url: string, mode: Mode) => {
  const Write = Handler.make("bench.write", {
    payload: Schema.Struct({ n: Schema.Number }),
    transactional: mode.transactional,
    run: ({ n }) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO bench_rows (n) VALUES (${n})`)
  })
  const layer = Docket.layer({
    database: url,
    databaseOptions: mode.maxConnections === undefined ? {} : { maxConnections: mode.maxConnections },
    handlers: [Write],
    concurrency: 10,
    transactions: mode.transactions,
    poll: "200 millis"
  })
  return Effect.gen(function*() {
    const worker = yield* Worker.Worker
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe("CREATE TABLE bench_rows (n INTEGER NOT NULL)")
    const started = performance.now()
    for (let i = 0; i < jobs; i += 1000) {
      yield* Docket.client(Write).enqueueMany(
        Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ payload: { n: i + k } }))
      )
    }
    // Completions recorded (a transactional one at its commit).
    while ((yield* worker.counters).completed < jobs) yield* Effect.sleep("5 millis")
    const seconds = (performance.now() - started) / 1000
    const [{ n }] = yield* sql<{ n: number | string }>`SELECT count(*) AS n FROM bench_rows`
    if (Number(n) < jobs) throw new Error(`${mode.name}: ${n} rows for ${jobs} items`)
    return jobs / seconds
  }).pipe(Effect.provide(layer), Effect.scoped)
}

const freshPg = async (name: string) => {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${name}`)
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

const main = async () => {
  const results = new Map<string, Array<number>>()
  for (let round = 1; round <= rounds; round++) {
    for (const dialect of ["pg", "sqlite"] as const) {
      for (const mode of MODES) {
        let url: string
        let cleanup = () => {}
        if (dialect === "pg") url = await freshPg("docket_bench_tx")
        else {
          const dir = mkdtempSync(join(tmpdir(), "docket-bench-tx-"))
          url = join(dir, "bench.db")
          cleanup = () => rmSync(dir, { recursive: true, force: true })
        }
        const rate = await Effect.runPromise(drain(url, mode))
        cleanup()
        const key = `${dialect}\t${mode.name}`
        results.set(key, [...(results.get(key) ?? []), rate])
        console.error(`round ${round} ${dialect} ${mode.name}: ${Math.round(rate)} items/s`)
      }
    }
  }
  console.log(`| dialect | mode | items/s (median of ${rounds}) | vs plain |`)
  console.log("|---|---|---:|---:|")
  for (const dialect of ["pg", "sqlite"]) {
    const plain = median(results.get(`${dialect}\tplain`)!)
    for (const mode of MODES) {
      const m = median(results.get(`${dialect}\t${mode.name}`)!)
      console.log(`| ${dialect} | ${mode.name} | ${Math.round(m)} | ${(m / plain).toFixed(2)}x |`)
    }
  }
}

void main()
