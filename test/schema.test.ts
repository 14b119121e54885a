/**
 * A schema of Docket's own on PostgreSQL (`Database.Options.schema`,
 * `--schema`, `docket grants`; docs/operations.md, "A schema of its own").
 *
 * - The name: checked before anything is opened; refused for SQLite.
 * - The texts: Docket's objects and channels rewritten to the schema's, and
 *   nothing else (the statement suite proves no text escapes it: it runs as
 *   a role without the schema on its path, test/store/pg.test.ts).
 * - Migrations as a role that owns only the schema (PostgreSQL 15 gives no
 *   CREATE on public), or that may create it; a clear error for a role that
 *   may do neither, or that may not use it; a worker's role with the schema
 *   up to date only reads. The objects are the lists pgSchema.ts keeps (what
 *   qualification and `docket grants` know), its functions pinned to it.
 * - Three queues in one database (public and two schemas): each sees only
 *   its items and notifies only its own channels; public keeps the channel
 *   of the releases before (and their 8-argument enqueue works); a pool
 *   listens on its schema's channel.
 * - `docket grants`' output, applied by the owner, is all a role needs for
 *   the command (migrate with nothing pending, enqueue, stats), and no more.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, ManagedRuntime, Option, Schema } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import pg from "pg"
import * as Database from "../src/Database.js"
import * as Docket from "../src/Docket.js"
import { InvalidInput, MigrationFailed } from "../src/Errors.js"
import * as Handler from "../src/Handler.js"
import * as Grants from "../src/internal/grants.js"
import { files } from "../src/internal/migrationFiles.js"
import * as PgSchema from "../src/internal/pgSchema.js"
import * as Migrations from "../src/Migrations.js"
import * as QueueRepo from "../src/QueueRepo.js"
import * as Worker from "../src/Worker.js"
import { docket } from "./support/cli.js"
import { freshDir, freshPgDatabase, PG_ADMIN_URL, pgAvailable, urlAs } from "./support/db.js"
import { waitForEvent } from "./support/events.js"

/** Every migration's id: what a first migrate applies. */
const ALL_MIGRATIONS = (await Effect.runPromise(files("pg"))).map((m) => m.id)

/** The failure a layer's build ends with. */
const buildFailure = <A, E>(layer: Layer.Layer<A, E>) =>
  Effect.runPromise(Effect.scoped(Effect.exit(Layer.build(layer)))).then((exit) => {
    if (Exit.isSuccess(exit)) throw new Error("the layer was built")
    return Cause.squash(exit.cause)
  })

describe("the schema's name and texts", () => {
  it("a name is a plain lower-case identifier of at most 49 characters, not PostgreSQL's own", () => {
    for (const good of ["docket", "app_queue", "_x1", "a".repeat(49)]) expect(PgSchema.check(good)).toMatchObject({ _tag: "Right", right: good })
    for (const bad of ["", "Docket", "my-queue", "1queue", "docket.x", "a b", "\"x\"", "a".repeat(50), "pg_docket"]) {
      const result = PgSchema.check(bad)
      expect(result._tag, bad).toBe("Left")
      if (result._tag === "Left") expect(result.left).toMatchObject({ _tag: "InvalidInput", field: "schema" })
    }
  })

  it("a bad name fails the layer with InvalidInput on schema before anything is opened; SQLite refuses any but public", async () => {
    // Nothing listens on port 1: had it connected, this would be DatabaseUnavailable.
    const error = await buildFailure(Database.layer("postgres://nobody@127.0.0.1:1/none", { schema: "My-Queue" }))
    expect(error).toBeInstanceOf(InvalidInput)
    expect(error).toMatchObject({ field: "schema" })
    expect(String((error as InvalidInput).message)).toMatch(/not a plain identifier/)
    expect(await buildFailure(Database.schemaLayer("pg_x"))).toMatchObject({ _tag: "InvalidInput", field: "schema" })
    const dir = freshDir()
    try {
      const file = join(dir.dir, "queue.db")
      const sqlite = await buildFailure(Database.layer(file, { schema: "docket" }))
      expect(sqlite).toMatchObject({ _tag: "InvalidInput", field: "schema" })
      expect(String((sqlite as InvalidInput).reason)).toMatch(/SQLite has no schemas/)
      expect(existsSync(file)).toBe(false)
      // public is SQLite's default and accepted.
      await Effect.runPromise(Effect.scoped(Layer.build(Database.layer(file, { schema: "public" }))))
      expect(existsSync(file)).toBe(true)
    } finally {
      dir.remove()
    }
  })

  it("qualifying rewrites Docket's objects and channels only, once per text; public is left as it is", () => {
    const s = PgSchema.make("app_q")
    const text = `-- docket_items in a comment
      SELECT i.id, docket_items.kind, "docket_items", 'docket_items_all', x.docket_done
      FROM docket_items i JOIN docket_items_all a ON a.id = i.id, docket_now_ms() n, docket_items_id_seq q
      WHERE pg_notify('docket_items', 'enqueued') IS NULL OR pg_notify('docket_cancel', '1') IS NULL
        OR docket_items_claim IS NULL OR my_docket_items IS NULL`
    expect(s.qualify(text)).toBe(`-- docket_items in a comment
      SELECT i.id, docket_items.kind, "docket_items", 'docket_items_all', x.docket_done
      FROM "app_q".docket_items i JOIN "app_q".docket_items_all a ON a.id = i.id, "app_q".docket_now_ms() n, "app_q".docket_items_id_seq q
      WHERE pg_notify('app_q.docket_items', 'enqueued') IS NULL OR pg_notify('app_q.docket_cancel', '1') IS NULL
        OR docket_items_claim IS NULL OR my_docket_items IS NULL`)
    expect(s.qualify(text)).toBe(s.qualify(text))
    expect([s.itemsChannel, s.cancelChannel, s.object("docket_kinds")]).toEqual(["app_q.docket_items", "app_q.docket_cancel", "\"app_q\".docket_kinds"])
    expect(PgSchema.publicSchema.qualify(text)).toBe(text)
    expect([PgSchema.publicSchema.itemsChannel, PgSchema.publicSchema.cancelChannel]).toEqual(["docket_items", "docket_cancel"])
  })
})

const Ok = Handler.make("ok", { payload: Schema.Unknown, run: () => Effect.void })

describe.skipIf(!pgAvailable)("a schema of Docket's own on PostgreSQL", () => {
  const suffix = `${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const roles = {
    /** Owns schema s (made for it by the administrator), and nothing else. */
    owner: `docket_s_owner_${suffix}`,
    /** The workers' role on s: only what `docket grants` prints. */
    app: `docket_s_app_${suffix}`,
    /** May create schemas in the database (CREATE on it): makes and owns t. */
    creator: `docket_s_creator_${suffix}`,
    /** Nothing at all. */
    nobody: `docket_s_nobody_${suffix}`
  }
  const cleanups: Array<() => Promise<void>> = []
  let admin: pg.Client
  let db: { url: string; drop: () => Promise<void> }
  const as = (role: string) => urlAs(db.url, role)

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: PG_ADMIN_URL })
    await admin.connect()
    for (const role of Object.values(roles)) {
      await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`)
      // No schema of Docket's on any role's path: an unqualified name fails.
      await admin.query(`ALTER ROLE ${role} SET search_path = docket_nowhere`)
    }
    db = await freshPgDatabase()
    const onDb = new pg.Client({ connectionString: db.url })
    await onDb.connect()
    await onDb.query(`CREATE SCHEMA s AUTHORIZATION ${roles.owner}`)
    await onDb.query(`GRANT CREATE ON DATABASE ${new URL(db.url).pathname.slice(1)} TO ${roles.creator}`)
    await onDb.end()
  })

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
    await db?.drop()
    for (const role of Object.values(roles)) await admin.query(`DROP ROLE IF EXISTS ${role}`)
    await admin.end()
  })

  /** Runs a statement as the administrator on the test database. */
  const onDb = async <R extends pg.QueryResultRow>(text: string, params: Array<unknown> = []) => {
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      return (await client.query<R>(text, params)).rows
    } finally {
      await client.end()
    }
  }

  const migrate = (url: string, schema: string) =>
    Effect.runPromise(Migrations.run.pipe(Effect.provide(Database.layer(url, { schema, migrate: false }))))

  it("the owner of the schema alone migrates it (no CREATE on public or the database); the objects are pgSchema.ts's lists, pinned to it", async () => {
    const [privileges] = await onDb<{ public: boolean; database: boolean }>(
      `SELECT has_schema_privilege($1, 'public', 'CREATE') AS public,
              has_database_privilege($1, current_database(), 'CREATE') AS database`,
      [roles.owner]
    )
    expect(privileges).toEqual({ public: false, database: false })
    expect(await migrate(as(roles.owner), "s")).toEqual(ALL_MIGRATIONS)
    expect(await migrate(as(roles.owner), "s")).toEqual([])

    const relations = await onDb<{ name: string; kind: string }>(
      `SELECT relname AS name, relkind::text AS kind FROM pg_class
       WHERE relnamespace = 's'::regnamespace AND relkind IN ('r', 'v', 'S') ORDER BY relname`
    )
    expect(relations.filter((r) => r.kind !== "S").map((r) => r.name)).toEqual([...PgSchema.RELATIONS].sort())
    expect(relations.filter((r) => r.kind === "S").map((r) => r.name)).toEqual([...PgSchema.SEQUENCES])
    const functions = await onDb<{ signature: string; config: Array<string> | null }>(
      `SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS signature, p.proconfig AS config
       FROM pg_proc p WHERE p.pronamespace = 's'::regnamespace`
    )
    expect(functions.map((f) => f.signature).sort()).toEqual([...PgSchema.FUNCTIONS].sort())
    for (const f of functions) {
      const pinned = (f.config ?? []).includes("search_path=s, pg_catalog")
      expect(pinned, f.signature).toBe(!f.signature.startsWith("docket_now_ms("))
    }
    // docket_now_ms has no SET clause, so it is still inlined (no function call left in the plan).
    const plan = await onDb<{ "QUERY PLAN": string }>("EXPLAIN VERBOSE SELECT s.docket_now_ms()")
    expect(plan.map((r) => r["QUERY PLAN"]).join("\n")).toMatch(/statement_timestamp\(\)/)
    // Nothing of Docket's went to public.
    expect(await onDb("SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'docket%'")).toEqual([])
  })

  it("a role that may create schemas makes its own; one that may not, or may not use it, fails saying what to grant; a worker's role only reads once up to date", async () => {
    expect(await migrate(as(roles.creator), "t")).toEqual(ALL_MIGRATIONS)
    expect(await onDb("SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 't'")).toEqual([{ owner: roles.creator }])

    const cannotCreate = await buildFailure(Database.layer(as(roles.nobody), { schema: "u" }))
    expect(cannotCreate).toBeInstanceOf(MigrationFailed)
    expect((cannotCreate as MigrationFailed).reason).toMatch(/schema u does not exist and this role may not create it.*CREATE SCHEMA u AUTHORIZATION/)
    const cannotUse = await buildFailure(Database.layer(as(roles.nobody), { schema: "s" }))
    expect((cannotUse as MigrationFailed).reason).toMatch(/this role may not use schema s.*docket grants --schema s/)

    // The workers' role, granted what `docket grants` prints: migrations on
    // (the default) with nothing pending only read (no CREATE is needed).
    const owner = new pg.Client({ connectionString: as(roles.owner) })
    await owner.connect()
    await owner.query(grantsOnS(roles.app))
    await owner.end()
    expect(await migrate(as(roles.app), "s")).toEqual([])
    // With a migration pending it may not apply it: the error says who must.
    const [last] = await onDb<{ migration_id: number; name: string }>(
      "DELETE FROM s.docket_migrations WHERE migration_id = (SELECT max(migration_id) FROM s.docket_migrations) RETURNING migration_id, name"
    )
    try {
      const pending = await buildFailure(Database.layer(as(roles.app), { schema: "s" }))
      expect((pending as MigrationFailed).reason).toMatch(/may not create tables in schema s.*the role that owns it/)
    } finally {
      await onDb("INSERT INTO s.docket_migrations (migration_id, name) VALUES ($1, $2)", [last.migration_id, last.name])
    }
  })

  it("moving a queue out of public as docs/operations.md says keeps every item; the owner's migrate pins the moved functions", async () => {
    // (This database's public: the next test migrates it again.)
    const moved = db
    const before = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(moved.url))))
      const repo = Context.get(context, QueueRepo.QueueRepo)
      const [dead, done, waiting] = yield* repo.enqueueMany(["dead", "done", "waiting"].map((payload) => ({ kind: "job", payload })))
      const [d, o] = yield* repo.claim({ worker: "w", limit: 2, lease: "1 minute" })
      yield* repo.fail(d, "broken", { _tag: "Dead" })
      yield* repo.complete(o)
      return { dead: dead.id, done: done.id, waiting: waiting.id }
    })))
    // The block of the docs, as written there (its owner this test's).
    const docs = readFileSync(new URL("../docs/operations.md", import.meta.url), "utf8")
    const section = docs.slice(docs.indexOf("### Moving an existing queue out of public"))
    const block = /```sql\n([\s\S]*?)```/.exec(section)![1].replaceAll("docket_owner", roles.owner)
    const client = new pg.Client({ connectionString: moved.url })
    await client.connect()
    await client.query(block)
    await client.end()
    const url = (role: string) => urlAs(moved.url, role)
    const grants = new pg.Client({ connectionString: url(roles.owner) })
    await grants.connect()
    await grants.query(Grants.statements(PgSchema.make("docket"), `"${roles.app}"`).join("\n"))
    await grants.end()
    // Moved functions have no search_path: the workers' role may not set it, and says who may.
    const unpinned = await buildFailure(Database.layer(url(roles.app), { schema: "docket" }))
    expect((unpinned as MigrationFailed).reason).toMatch(/functions of schema docket have no search_path.*as the schema's owner/)
    expect(await migrate(url(roles.owner), "docket")).toEqual([])
    const after = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(
        QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(url(roles.app), { schema: "docket" })))
      )
      const repo = Context.get(context, QueueRepo.QueueRepo)
      const states = yield* Effect.forEach([before.dead, before.done, before.waiting], (id) =>
        Effect.map(repo.get(id), (item) => Option.getOrThrow(item).state))
      const [claim] = yield* repo.claim({ worker: "w", limit: 5, lease: "1 minute" })
      return { states, claimed: claim.id, next: (yield* repo.enqueue("job", "new")).id }
    })))
    expect(after).toEqual({ states: ["dead", "done", "waiting"], claimed: before.waiting, next: before.waiting + 1 })
    expect(await onDb("SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'docket%'")).toEqual([])
  })

  it("three queues in one database (public, s, t) each see their own items and notify only their own channels; a pool listens on its schema's", async () => {
    expect(await migrate(db.url, "public")).toEqual(ALL_MIGRATIONS)
    const queue = (url: string, schema: string) => {
      const runtime = ManagedRuntime.make(Docket.layerClient(url, { databaseOptions: { schema } }))
      cleanups.push(() => runtime.dispose())
      return <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
        runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, f))
    }
    const queues = { public: queue(db.url, "public"), s: queue(as(roles.app), "s"), t: queue(as(roles.creator), "t") }
    const listener = new pg.Client({ connectionString: db.url })
    await listener.connect()
    cleanups.push(() => listener.end())
    const heard: Array<string> = []
    listener.on("notification", (n) => heard.push(`${n.channel}:${n.payload}`))
    for (const channel of ["docket_items", "docket_cancel", "s.docket_items", "s.docket_cancel", "t.docket_items", "t.docket_cancel"]) {
      await listener.query(`LISTEN ${listener.escapeIdentifier(channel)}`)
    }
    // A round trip on the listener after the last commit: every notification sent by then has arrived.
    const heardNow = async () => {
      await listener.query("SELECT 1")
      return heard.splice(0).sort()
    }

    const one = await queues.s((repo) => repo.enqueue("job", "in s"))
    await queues.t((repo) => repo.enqueueMany([{ kind: "job", payload: "in t" }, { kind: "job", payload: "in t, 2" }]))
    await queues.public((repo) => repo.enqueue("job", "in public"))
    // A worker of the release before 0016 (public only): its 8-argument enqueue still notifies public's channel.
    await onDb("SELECT * FROM docket_enqueue_one('job', '\"old release\"', NULL, 0, NULL, 0, NULL, NULL)")
    expect(await heardNow()).toEqual(["docket_items:enqueued", "docket_items:enqueued", "s.docket_items:enqueued", "t.docket_items:enqueued"])

    // Each sees its own items only (ids are each schema's own: item 1 is in all three).
    expect(one.id).toBe(1)
    const payloadOf1 = (run: typeof queues.s) => run((repo) => Effect.map(repo.get(1), (item) => Option.getOrThrow(item).payload))
    expect(await Promise.all([payloadOf1(queues.public), payloadOf1(queues.s), payloadOf1(queues.t)])).toEqual(["in public", "in s", "in t"])
    expect((await queues.s((repo) => repo.stats)).due).toBe(1)
    expect((await queues.t((repo) => repo.stats)).due).toBe(2)
    expect((await queues.public((repo) => repo.stats)).due).toBe(2)
    const claimed = await queues.s((repo) => repo.claim({ worker: "w", limit: 10, lease: "1 minute" }))
    expect(claimed.map((c) => c.payloadJson)).toEqual(["\"in s\""])
    // A cancel of a running item, a resumed kind: the schema's channels only.
    expect(await queues.s((repo) => repo.cancel([claimed[0].id]))).toEqual(["cancelledRunning"])
    await queues.t((repo) => Effect.zipRight(repo.pauseKind("job"), repo.resumeKind("job")))
    expect(await heardNow()).toEqual([`s.docket_cancel:${claimed[0].id}`, "t.docket_items:kinds"])

    // A pool in s that polls once an hour runs an item another process enqueues in s: woken by s's channel.
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(
        Worker.layer({ handlers: [Ok], poll: "1 hour" }).pipe(Layer.provideMerge(
          QueueRepo.layer().pipe(Layer.provideMerge(Database.layer(as(roles.app), { schema: "s" })))
        ))
      )
      const pool = Context.get(context, Worker.Worker)
      const events = yield* pool.subscribe
      yield* pool.whenIdle
      const added = yield* Effect.promise(() => queues.s((repo) => repo.enqueue("ok", "wake")))
      yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "20 seconds")
    })))
  })

  it("docket grants, applied by the owner, is all a role needs for the command; and the role may change no table", async () => {
    await onDb(`CREATE SCHEMA g AUTHORIZATION ${roles.owner}`)
    expect(await migrate(as(roles.owner), "g")).toEqual(ALL_MIGRATIONS)
    const grants = await docket(["grants", "--schema", "g", "--role", roles.app])
    expect(grants.code, grants.stderr).toBe(0)
    expect(grants.stdout).toMatch(/^GRANT USAGE ON SCHEMA "g" TO "docket_s_app_/m)
    const owner = new pg.Client({ connectionString: as(roles.owner) })
    await owner.connect()
    await owner.query(grants.stdout)
    await owner.end()

    // As the role, at once (each start of the command costs seconds here):
    // migrate with nothing pending (it only reads), an enqueue, stats; and
    // the schema from DOCKET_SCHEMA when --schema is not given, a bad one
    // from either refused before anything is opened.
    // Five starts at once on two cores took up to 40 s in a loaded run: a bound for a hang, not a timing.
    const env = { DOCKET_DATABASE_URL: as(roles.app), DOCKET_SCHEMA: "g" }
    const timeoutMs = 120_000
    const [upToDate, enqueued, stats, badFlag, badEnv] = await Promise.all([
      docket(["migrate"], { env, timeoutMs }),
      docket(["enqueue", "job", "{\"n\":1}", "--schema", "g"], { env: { DOCKET_DATABASE_URL: as(roles.app) }, timeoutMs }),
      docket(["stats", "--json"], { env, timeoutMs }),
      docket(["stats", "--schema", "Bad-Name"], { env, timeoutMs }),
      // (Nothing listens on port 1: had it connected, the exit would be 1.)
      docket(["stats"], { env: { DOCKET_DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", DOCKET_SCHEMA: "Bad" }, timeoutMs })
    ])
    expect(upToDate.code, upToDate.stderr).toBe(0)
    expect(upToDate.stdout).toMatch(/\(schema g\): the schema is up to date/)
    expect(enqueued.code, enqueued.stderr).toBe(0)
    expect(stats.code, stats.stderr).toBe(0)
    expect(JSON.parse(stats.stdout)).toHaveProperty("due")
    expect(badFlag.code).toBe(2)
    expect(badFlag.stderr).toMatch(/--schema: "Bad-Name" is not a plain identifier/)
    expect(badEnv.code).toBe(2)
    expect(badEnv.stderr).toMatch(/invalid schema: "Bad" is not a plain identifier/)
    expect(Number(enqueued.stdout.trim())).toBe(1)

    // Least: the role may not change the schema, nor touch what is not Docket's.
    const app = new pg.Client({ connectionString: as(roles.app) })
    await app.connect()
    cleanups.push(() => app.end())
    for (const statement of ["DROP TABLE g.docket_items", "ALTER TABLE g.docket_kinds ADD COLUMN x int", "CREATE TABLE g.x (y int)", "DELETE FROM g.docket_migrations"]) {
      await expect(app.query(statement), statement).rejects.toMatchObject({ code: "42501" })
    }
  })
})

/** `docket grants`' statements for schema s, as one text (the command's own output is applied in the last test). */
const grantsOnS = (role: string) => Grants.statements(PgSchema.make("s"), `"${role}"`).join("\n")
