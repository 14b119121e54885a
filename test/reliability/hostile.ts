/**
 * Hostile input, on SQLite and PostgreSQL: payloads, kinds, keys, worker
 * names and error texts with quotes, NUL bytes, huge strings, deep JSON,
 * SQL-shaped text and invalid UTF-16. Each is stored exactly (read back the
 * same through claim, get and a real worker's handler) or refused with a
 * typed `InvalidInput` that wrote nothing.
 *
 * Every string carries a marker; the SQL text each driver receives is
 * recorded (pg's `Client.query`, better-sqlite3's `prepare`) and none holds
 * the marker: no input ever becomes part of a statement.
 *
 * The command: bad flags and bad bulk lines are refused (exit 2) before the
 * database is opened: no SQLite file appears, no PostgreSQL table is made.
 */
import { SqlClient } from "@effect/sql"
import Sqlite from "better-sqlite3"
import { Context, Effect, Layer, ManagedRuntime, Option, Schema } from "effect"
import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import * as Docket from "../../src/Docket.js"
import { InvalidInput } from "../../src/Errors.js"
import * as Handler from "../../src/Handler.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import * as Worker from "../../src/Worker.js"
import { docketAll } from "../support/cli.js"
import { type Backend, freshDir, freshPgDatabase, pgAvailable, pgBackend, repoLayer, sqliteBackend } from "../support/db.js"
import { report } from "./support.js"

const M = "HX9q" // the marker every hostile string carries

const deep = (depth: number): unknown => {
  let value: unknown = `${M} bottom`
  for (let i = 0; i < depth; i++) value = [value]
  return value
}
const deepObject = (depth: number): unknown => {
  let value: unknown = `${M} bottom`
  for (let i = 0; i < depth; i++) value = { [`${M}"k'`]: value }
  return value
}
const circular = (() => {
  const o: Record<string, unknown> = { name: M }
  o.self = o
  return o
})()

/** Payloads: [name, value]. */
const PAYLOADS: ReadonlyArray<readonly [string, unknown]> = [
  ["quotes", { q: `${M} it's "quoted" \`back\` \\ slash` }],
  ["NUL in a string", `${M}a\u0000b`],
  ["NUL in a key", { [`${M}\u0000k`]: `\u0000` }],
  ["SQL-shaped", `${M}'); DROP TABLE docket_items; --`],
  ["parameter marks", [`${M} $1`, "?1", "?", "$$", ":name", "@p"]],
  ["LIKE and escapes", `${M} %_\\x00 E'\\\\' /* */ ;`],
  ["lone high surrogate", `${M}\ud800`],
  ["reversed surrogates", `${M}\udfff\ud800`],
  ["surrogate as object key", { [`${M}\ud83d`]: 1 }],
  ["unicode", `${M} 😀 עברית \ufeff \u2028 \u2029 \u0085`],
  ["numbers", { big: 1e308, small: 5e-324, neg: -1.5, int: 9007199254740991, marker: M }],
  ["deep array (1,000)", deep(1000)],
  ["deep object (1,000)", deepObject(1000)],
  // Deeper than about 2,000 levels, JSON.stringify runs out of stack: refused (InvalidInput).
  ["deep array (5,000)", deep(5000)],
  ["just under 1 MiB", `${M}${"x".repeat(1024 * 1024 - 2 - M.length)}`],
  ["over 1 MiB", `${M}${"x".repeat(1024 * 1024)}`],
  ["multi-byte over 1 MiB", `${M}${"é".repeat(600 * 1024)}`],
  ["deep array (1,000,000)", deep(1_000_000)],
  ["NaN", { n: Number.NaN, marker: M }],
  ["Infinity", [Number.POSITIVE_INFINITY, M]],
  ["a function", { f: () => M }],
  ["a BigInt", { b: BigInt(1), marker: M }],
  ["circular", circular],
  ["undefined", undefined]
]

const KINDS: ReadonlyArray<string> = [
  `${M}.ok-kind_1:x`,
  `${M}'quote`,
  `${M}"dq`,
  `${M}\u0000nul`,
  `${M} space`,
  `${M};DROP TABLE docket_items`,
  `${M}--`,
  `${M}\ud800`,
  `${M}ü`,
  "",
  `${M}${"k".repeat(130)}`,
  `-${M}`
]

const KEYS: ReadonlyArray<string> = [
  `${M}'); DROP TABLE docket_items; --`,
  `${M} "double" and 'single'`,
  `${M}\\`,
  `${M}%`,
  `${M} 😀`,
  `${M}${"k".repeat(512 - M.length)}`,
  `${M}\u0000`,
  `${M}\ud800`,
  `${M}${"k".repeat(513 - M.length)}`,
  ""
]

const describeValue = (v: unknown) => {
  try {
    const s = JSON.stringify(v)
    return s === undefined ? String(v) : s.length > 40 ? `${s.slice(0, 40)}…` : s
  } catch {
    return String(v)
  }
}

/** Records the SQL text of every statement sent while it is on. */
const recordStatements = () => {
  const texts: Array<string> = []
  const pgQuery = pg.Client.prototype.query
  const sqlitePrepare = Sqlite.prototype.prepare
  pg.Client.prototype.query = function(this: pg.Client, ...args: Array<unknown>) {
    const first = args[0]
    texts.push(typeof first === "string" ? first : String((first as { text?: unknown })?.text ?? ""))
    return (pgQuery as (...a: Array<unknown>) => unknown).apply(this, args)
  } as typeof pgQuery
  Sqlite.prototype.prepare = function(this: Sqlite.Database, source: string) {
    texts.push(source)
    return sqlitePrepare.call(this, source)
  } as typeof sqlitePrepare
  return {
    texts,
    stop: () => {
      pg.Client.prototype.query = pgQuery
      Sqlite.prototype.prepare = sqlitePrepare
    }
  }
}

const hostile = (backend: Backend) => {
  afterAll(() => backend.cleanup())

  it("stores every hostile value exactly or refuses it with InvalidInput; no statement holds input", async () => {
    const recorder = recordStatements()
    const url = await backend.fresh()
    const received = new Map<number, unknown>()
    const Echo = Handler.make(`${M}.echo`, {
      payload: Schema.Unknown,
      run: (payload, job) => Effect.sync(() => received.set(job.id, payload))
    })
    const runtime = ManagedRuntime.make(repoLayer(url))
    const accepted: Array<{ id: number; name: string; value: unknown }> = []
    const figures = { stored: 0, refused: 0, keysStored: 0, keysRefused: 0, kindsStored: 0, kindsRefused: 0, statements: 0 }
    try {
      const problems: Array<string> = []
      await runtime.runPromise(Effect.gen(function*() {
        const repo = yield* QueueRepo.QueueRepo
        const sql = yield* SqlClient.SqlClient
        const count = sql.unsafe<{ n: number | string }>("SELECT count(*) AS n FROM docket_items_all").pipe(
          Effect.map((rows) => Number(rows[0].n))
        )
        /** An operation that must either succeed or fail with InvalidInput having written nothing. */
        const attempt = <A>(what: string, effect: Effect.Effect<A, unknown>) =>
          Effect.gen(function*() {
            const before = yield* count
            const result = yield* Effect.either(effect)
            if (result._tag === "Right") return Option.some(result.right)
            const error = result.left
            if (!(error instanceof InvalidInput)) problems.push(`${what}: failed with ${String(error)} (not InvalidInput)`)
            if ((yield* count) !== before) problems.push(`${what}: refused but the table changed`)
            return Option.none<A>()
          })

        // Payloads: stored exactly (claim and get give them back), or refused.
        const taken: Array<QueueRepo.Claim> = []
        for (const [name, value] of PAYLOADS) {
          const added = yield* attempt(`payload ${name}`, repo.enqueue(`${M}.echo`, value))
          if (Option.isNone(added)) {
            figures.refused++
            continue
          }
          figures.stored++
          const json = JSON.stringify(value)
          const [claim] = yield* repo.claim({ worker: `${M}-w`, limit: 1, lease: "1 minute", kinds: [`${M}.echo`] })
          if (claim?.id !== added.value.id) problems.push(`payload ${name}: not claimed back`)
          else if (claim.payloadJson !== json) problems.push(`payload ${name}: stored JSON differs`)
          const item = yield* repo.get(added.value.id)
          if (Option.isNone(item)) problems.push(`payload ${name}: not found`)
          else expect(item.value.payload, `payload ${name}`).toStrictEqual(JSON.parse(json))
          if (claim !== undefined) taken.push(claim)
          accepted.push({ id: added.value.id, name, value })
        }
        // Back to waiting, for the worker below.
        yield* repo.releaseMany(taken)
        // These must be refused: too big, not JSON, or too deep to encode.
        const mustRefuse = ["deep array (1,000,000)", "over 1 MiB", "multi-byte over 1 MiB", "NaN", "Infinity", "a function", "a BigInt", "circular", "undefined"]
        for (const name of mustRefuse) {
          if (accepted.some((a) => a.name === name)) problems.push(`payload ${name}: accepted`)
        }
        for (const name of ["quotes", "NUL in a string", "SQL-shaped", "lone high surrogate", "just under 1 MiB", "deep array (1,000)", "deep object (1,000)"]) {
          if (!accepted.some((a) => a.name === name)) problems.push(`payload ${name}: refused`)
        }

        // Kinds: the safe pattern is stored exactly; anything else refused.
        for (const kind of KINDS) {
          const added = yield* attempt(`kind ${describeValue(kind)}`, repo.enqueue(kind, null))
          if (Option.isNone(added)) {
            figures.kindsRefused++
            continue
          }
          figures.kindsStored++
          const item = yield* repo.get(added.value.id)
          if (Option.getOrUndefined(item)?.kind !== kind) problems.push(`kind ${describeValue(kind)}: stored differently`)
        }
        expect(figures.kindsStored).toBe(2) // `${M}.ok-kind_1:x` and `${M}--`

        // Keys: stored exactly and deduped exactly; NUL, lone surrogates, empty and too long refused.
        for (const key of KEYS) {
          const added = yield* attempt(`key ${describeValue(key)}`, repo.enqueue(`${M}.keyed`, { key }, { key }))
          if (Option.isNone(added)) {
            figures.keysRefused++
            continue
          }
          figures.keysStored++
          const item = Option.getOrUndefined(yield* repo.get(added.value.id))
          if (item?.key !== key) problems.push(`key ${describeValue(key)}: stored differently`)
          const again = yield* repo.enqueue(`${M}.keyed`, null, { key })
          if (again._tag !== "Deduplicated" || again.id !== added.value.id) problems.push(`key ${describeValue(key)}: not deduped`)
          const other = yield* repo.enqueue(`${M}.keyed`, null, { key: `${key.slice(0, 500)}x` })
          if (other._tag !== "Enqueued") problems.push(`key ${describeValue(key)}: a different key was deduped with it`)
        }
        expect(figures.keysRefused).toBe(4)

        // Worker names and error texts.
        const [claim] = yield* repo.claim({ worker: `${M}'; DROP TABLE docket_items; --`, limit: 1, lease: "1 minute", kinds: [`${M}.keyed`] })
        expect(claim.worker).toBe(`${M}'; DROP TABLE docket_items; --`)
        yield* attempt("worker with NUL", repo.claim({ worker: `${M}\u0000`, limit: 1, lease: "1 minute" })).pipe(
          Effect.tap((r) => Option.isSome(r) ? Effect.sync(() => problems.push("worker with NUL: accepted")) : Effect.void)
        )
        const error = `${M} it's "failed"; DROP TABLE docket_items; -- \u0000 \ud800`
        expect(yield* repo.fail(claim, error, { _tag: "Dead" })).toBe("dead")
        const dead = Option.getOrThrow(yield* repo.get(claim.id))
        // NUL is kept escaped and a lone surrogate replaced (PostgreSQL text holds neither).
        expect(dead.lastError).toBe(`${M} it's "failed"; DROP TABLE docket_items; -- \\u0000 \ufffd`)
      }))
      // A real worker (its own connection) runs every accepted payload; its handler sees each exactly.
      await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(Docket.layer({ database: url, handlers: [Echo], claimKinds: "handled", poll: "100 millis" }))
        const worker = Context.get(context, Worker.Worker)
        yield* worker.whenIdle.pipe(Effect.timeout("60 seconds"))
      })))
      const left = await runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.stats))
      // Nothing of the kind left to do (what ran is kept as done).
      expect(left.byKind[`${M}.echo`], "every accepted payload ran and completed").toMatchObject({
        due: 0, scheduled: 0, running: 0, dead: 0, cancelled: 0
      })
      expect([...received.keys()].sort((a, b) => a - b)).toEqual(accepted.map((a) => a.id))
      for (const { id, name, value } of accepted) {
        expect(received.get(id), `the handler's payload: ${name}`).toStrictEqual(JSON.parse(JSON.stringify(value)))
      }
      expect(problems).toEqual([])
    } finally {
      recorder.stop()
      await runtime.dispose()
    }
    figures.statements = recorder.texts.length
    const leaks = recorder.texts.filter((t) => t.includes(M))
    report(`hostile input (${backend.name})`, { ...figures, statementsWithInput: leaks.length })
    expect(recorder.texts.length).toBeGreaterThan(20)
    expect(leaks).toEqual([])
  }, 120_000)
}

const commandRefusals = () =>
  it("the command refuses bad flags and bad bulk lines without writing", async () => {
    const scratch = freshDir()
    const file = (name: string, text: string) => {
      const path = join(scratch.dir, name)
      writeFileSync(path, text)
      return path
    }
    const okLine = JSON.stringify({ kind: "ok", payload: { a: 1 } })
    const bulk = [
      file("nul-key.ndjson", `${okLine}\n{"kind":"ok","payload":{},"key":"a\\u0000b"}\n`),
      file("surrogate-key.ndjson", `${okLine}\n{"kind":"ok","payload":{},"key":"\\ud800"}\n`),
      file("sql-kind.ndjson", `${okLine}\n{"kind":"x'; DROP TABLE docket_items; --","payload":{}}\n`),
      file("huge.ndjson", `${okLine}\n${JSON.stringify({ kind: "ok", payload: "x".repeat(1024 * 1024 + 10) })}\n`)
    ]
    // (Each is a process start; test/cli/usage.test.ts covers the ordinary bad flags.)
    const cases: ReadonlyArray<ReadonlyArray<string>> = [
      ["enqueue", "x'; DROP TABLE docket_items; --", "{}"],
      ["enqueue", "ok", "{}", "--priority", "1; DROP TABLE docket_items"],
      ["enqueue", "ok", "{}", "--delay", "1s'; DROP TABLE docket_items; --"],
      ["enqueue", "ok", "{}", "--run-at", "2030-01-01'; --"],
      ["enqueue", "ok", `{"a":"\\ud800", `],
      ["dead", "retry", "1; DROP TABLE docket_items"],
      ["worker", "--tasks", scratch.dir, "--lease", "0"],
      ...bulk.map((path) => ["enqueue", "--from", path])
    ]
    const targets: Array<{ name: string; url: string; untouched: () => Promise<boolean>; drop: () => Promise<void> }> = [
      {
        name: "sqlite",
        url: join(scratch.dir, "never-made.db"),
        untouched: async () => !existsSync(join(scratch.dir, "never-made.db")),
        drop: async () => {}
      }
    ]
    if (pgAvailable) {
      const db = await freshPgDatabase()
      targets.push({
        name: "pg",
        url: db.url,
        untouched: async () => {
          const client = new pg.Client({ connectionString: db.url })
          await client.connect()
          try {
            const { rows } = await client.query<{ n: string }>(
              "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'"
            )
            return Number(rows[0].n) === 0
          } finally {
            await client.end()
          }
        },
        drop: db.drop
      })
    }
    try {
      let refused = 0
      for (const target of targets) {
        const results = await docketAll(cases.map((args) => [...args, "--database", target.url]), {}, 2)
        results.forEach((result, i) => {
          expect({ args: cases[i].join(" ").slice(0, 80), code: result.code }).toEqual({
            args: cases[i].join(" ").slice(0, 80),
            code: 2
          })
          expect(result.stdout, cases[i].join(" ")).toBe("")
        })
        refused += results.length
        expect(await target.untouched(), `${target.name}: nothing written`).toBe(true)
      }
      report("hostile command input", { cases: cases.length, backends: targets.length, refused, written: 0 })
    } finally {
      for (const target of targets) await target.drop()
      scratch.remove()
    }
  }, 180_000)

export const hostileScenario = () =>
  describe("hostile input", () => {
    describe("on SQLite", () => hostile(sqliteBackend()))
    describe.skipIf(!pgAvailable)("on PostgreSQL", () => hostile(pgBackend()))
    describe("the docket command", () => commandRefusals())
  })
