/**
 * TLS to PostgreSQL with libpq's meanings (src/internal/tls.ts,
 * docs/operations.md "TLS"): the settings as read, without a server; then
 * every sslmode against a cluster of the test's own serving TLS with a CA
 * and certificates made here (test/support/tls.ts), whose pg_hba.conf
 * refuses connections without TLS, and against one without TLS; a worker
 * whose every connection (pool, migrations, LISTEN, cancel) uses TLS; and
 * the command.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Database from "../src/Database.js"
import * as Docket from "../src/Docket.js"
import * as Handler from "../src/Handler.js"
import * as DirectPool from "../src/internal/directPool.js"
import * as Tls from "../src/internal/tls.js"
import * as Worker from "../src/Worker.js"
import { docketAll } from "./support/cli.js"
import { type Cluster, clusterAvailable, privateCluster } from "./support/cluster.js"
import { repoLayer } from "./support/db.js"
import { waitForEvent } from "./support/events.js"
import {
  type Certificates,
  CLIENT_KEY_PASSWORD,
  makeCertificates,
  opensslAvailable,
  query,
  tlsCluster,
  type TlsCluster
} from "./support/tls.js"

// Whether this session is encrypted, asked over the layer's own pool.
const sessionSsl = (url: string, options: Database.Options = {}) =>
  Effect.scoped(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ ssl: boolean }>`SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`
      return rows[0].ssl
    }).pipe(Effect.provide(Database.layer(url, { migrate: false, ...options })))
  )

// The layer's failure (it must fail, and with DatabaseUnavailable).
const refusal = (url: string, options: Database.Options = {}) =>
  Effect.flatMap(Effect.flip(sessionSsl(url, options)), (error) =>
    error._tag === "DatabaseUnavailable" ? Effect.succeed(error) : Effect.die(error))

describe.skipIf(!opensslAvailable)("TLS settings as libpq reads them (no server)", () => {
  let certs: Certificates
  let home: string
  beforeAll(() => {
    certs = makeCertificates()
    home = mkdtempSync(join(tmpdir(), "docket-home-"))
  })
  afterAll(() => {
    rmSync(certs.dir, { recursive: true, force: true })
    rmSync(home, { recursive: true, force: true })
  })
  // No environment, and a ~/.postgresql of the test's own (empty unless a test writes to it).
  const read = (url: string, options: Tls.TlsOptions = {}, env: Record<string, string> = {}) => {
    const result = Tls.resolve(url, options, { env, dir: home })
    return "ok" in result ? result.ok : result.error
  }
  const resolved = (url: string, options: Tls.TlsOptions = {}, env: Record<string, string> = {}) => {
    const result = read(url, options, env)
    if (result instanceof Error) throw result
    return result
  }

  it("takes the TLS parameters out of the URL pg reads (pg would apply its own meanings) and keeps the others as written", () => {
    const r = resolved("postgres://u@db.example:5433/app?application_name=a%20b&sslmode=require&uselibpqcompat=true&options=-c%20x%3D1")
    expect(r.url).toBe("postgres://u@db.example:5433/app?application_name=a%20b&options=-c%20x%3D1")
    expect(r.mode).toBe("require")
    expect(r.host).toBe("db.example")
    // require without a root certificate: encrypted, nothing verified (libpq's meaning; pg's is verify-full).
    expect(r.attempts).toEqual([{ rejectUnauthorized: false }])
    expect(resolved("postgres://u@h/app?sslmode=disable").url).toBe("postgres://u@h/app")
  })

  it("no sslmode anywhere is no TLS; PGSSLMODE is read when the URL and the options say nothing; the URL wins", () => {
    expect(resolved("postgres://u@h/app").attempts).toEqual([false])
    expect(resolved("postgres://u@h/app", {}, { PGSSLMODE: "require" }).mode).toBe("require")
    expect(resolved("postgres://u@h/app?sslmode=disable", {}, { PGSSLMODE: "require" }).mode).toBe("disable")
    expect(resolved("postgres://u@h/app", { mode: "prefer" }, { PGSSLMODE: "require" }).mode).toBe("prefer")
  })

  it("a root certificate makes every mode verify the chain, and only verify-full the host name (as libpq)", () => {
    for (const mode of ["allow", "prefer", "require", "verify-ca", "verify-full"] as const) {
      const r = resolved(`postgres://u@h/app${query({ sslmode: mode, sslrootcert: certs.ca })}`)
      const tls = r.attempts.find((a) => a !== false)
      expect(tls, mode).toMatchObject({ rejectUnauthorized: true, ca: readFileSync(certs.ca, "utf8") })
      expect(tls !== undefined && tls.checkServerIdentity !== undefined, mode).toBe(mode !== "verify-full")
    }
    // allow tries without TLS first, prefer with it first.
    expect(resolved("postgres://u@h/app?sslmode=allow").attempts).toEqual([false, { rejectUnauthorized: false }])
    expect(resolved("postgres://u@h/app?sslmode=prefer").attempts).toEqual([{ rejectUnauthorized: false }, false])
  })

  it("~/.postgresql/root.crt is the default root certificate; verify-ca and verify-full without one are refused", () => {
    const refused = read("postgres://u@h/app?sslmode=verify-full")
    expect(refused).toBeInstanceOf(Tls.Refused)
    expect(refused).toMatchObject({ setting: "sslrootcert" })
    expect((refused as Error).message).toMatch(/^sslmode=verify-full needs the CA certificate .* give sslrootcert=<file> .*root\.crt does not exist$/)
    writeFileSync(join(home, "root.crt"), readFileSync(certs.ca))
    try {
      const r = resolved("postgres://u@h/app?sslmode=require")
      expect(r.attempts[0]).toMatchObject({ rejectUnauthorized: true })
      expect(r.rootSource).toBe(`${join(home, "root.crt")} (libpq's default sslrootcert)`)
    } finally {
      rmSync(join(home, "root.crt"))
    }
  })

  it("sslrootcert=system: Node's roots, verify-full by default and required", () => {
    const r = resolved("postgres://u@h/app?sslrootcert=system")
    expect(r.mode).toBe("verify-full")
    expect(r.attempts).toEqual([{ rejectUnauthorized: true }])
    expect(read("postgres://u@h/app?sslmode=require&sslrootcert=system")).toMatchObject({
      setting: "sslrootcert",
      message: expect.stringMatching(/^sslrootcert=system needs sslmode=verify-full, not require/)
    })
  })

  it("node-postgres's ssl parameter keeps its meaning when no sslmode is given", () => {
    expect(resolved("postgres://u@h/app?ssl=true").attempts).toEqual([{ rejectUnauthorized: true }])
    expect(resolved("postgres://u@h/app?ssl=no-verify").attempts).toEqual([{ rejectUnauthorized: false }])
    expect(resolved("postgres://u@h/app?ssl=false").attempts).toEqual([false])
    expect(resolved("postgres://u@h/app?ssl=true").url).toBe("postgres://u@h/app")
  })

  it("refuses, naming the setting: an unknown sslmode, a setting given twice differently, one pg cannot honour, a client key without its certificate", () => {
    expect(read("postgres://u@h/app?sslmode=no-verify")).toMatchObject({
      setting: "sslmode",
      message: `sslmode: "no-verify" (in the URL) is not one of disable, allow, prefer, require, verify-ca, verify-full ` +
        `(node-postgres's no-verify is libpq's require)`
    })
    expect(read("postgres://u@h/app", { mode: "strict" as Tls.SslMode })).toMatchObject({
      setting: "sslmode",
      message: expect.stringMatching(/^sslmode: "strict" \(in Database.Options\) is not one of/)
    })
    expect(read("postgres://u@h/app?sslmode=require", { mode: "verify-full" })).toMatchObject({ setting: "sslmode" })
    expect(read("postgres://u@h/app?sslmode=require&sslcrl=/etc/crl.pem")).toMatchObject({
      setting: "sslcrl",
      message: "sslcrl is not supported by Docket (node-postgres has no such setting): remove it from the URL"
    })
    expect(read(`postgres://u@h/app${query({ sslmode: "require", sslkey: certs.clientKey })}`)).toMatchObject({ setting: "sslcert" })
    expect(read("postgres://u@h/app?sslmode=require&sslrootcert=/nowhere/ca.crt")).toMatchObject({
      setting: "sslrootcert",
      message: expect.stringMatching(/^sslrootcert=\/nowhere\/ca\.crt: cannot read the CA certificate: ENOENT/)
    })
    // Over a Unix socket libpq never uses TLS, whatever sslmode says.
    expect(resolved("postgres://u@/app?host=/run/postgresql&sslmode=require").attempts).toEqual([false])
  })

  it("a URL in errors and logs hides sslpassword as it hides the password", () => {
    expect(Database.describe(Database.parse("postgres://u:secret@h/app?sslmode=require&sslpassword=hush&x=1")))
      .toBe("postgres://u:***@h/app?sslmode=require&sslpassword=***&x=1")
  })
})

describe.skipIf(!opensslAvailable || !clusterAvailable)("TLS to PostgreSQL clusters of the test's own", () => {
  let tls: TlsCluster
  let plain: Cluster
  beforeAll(async () => {
    ;[tls, plain] = await Promise.all([tlsCluster(), privateCluster()])
  })
  afterAll(async () => {
    await Promise.all([tls?.destroy(), plain?.destroy()])
  })

  it.live("each sslmode, in the URL: what is verified, what is refused, and why", () =>
    Effect.gen(function*() {
      const { ca, otherCa } = tls.certs
      // require: encrypted, the certificate (for localhost, of a CA it does not know) unchecked.
      expect(yield* sessionSsl(tls.url("127.0.0.1", "docket", { sslmode: "require" }))).toBe(true)
      // ... but with a root certificate, the chain is checked (as libpq does).
      const wrongCa = yield* refusal(tls.url("127.0.0.1", "docket", { sslmode: "require", sslrootcert: otherCa }))
      expect(wrongCa._tag).toBe("DatabaseUnavailable")
      expect(wrongCa.reason).toMatch(
        new RegExp(`^Failed to connect: the server's certificate is not signed by the CA in sslrootcert=${otherCa} \\(.*\\): give sslrootcert the CA`)
      )
      // verify-ca: the chain, not the name (127.0.0.1 is not in the certificate).
      expect(yield* sessionSsl(tls.url("127.0.0.1", "docket", { sslmode: "verify-ca", sslrootcert: ca }))).toBe(true)
      expect((yield* refusal(tls.url("127.0.0.1", "docket", { sslmode: "verify-ca", sslrootcert: otherCa }))).reason)
        .toMatch(/the server's certificate is not signed by the CA in sslrootcert=/)
      // verify-full: the chain and the name.
      expect(yield* sessionSsl(tls.url("localhost", "docket", { sslmode: "verify-full", sslrootcert: ca }))).toBe(true)
      expect((yield* refusal(tls.url("127.0.0.1", "docket", { sslmode: "verify-full", sslrootcert: ca }))).reason).toMatch(
        /^Failed to connect: the server's certificate is not for the host "127\.0\.0\.1" \(sslmode=verify-full checks the name; .*\): connect by a name the certificate lists, or use sslmode=verify-ca/
      )
      // disable, and no sslmode: no TLS, which this server refuses for the database docket.
      for (const params of [{ sslmode: "disable" }, {}] as Array<Record<string, string>>) {
        expect((yield* refusal(tls.url("127.0.0.1", "docket", params))).reason).toMatch(
          /rejects connection for host "127\.0\.0\.1", user "root", database "docket", no encryption \(.*\): the server accepts only TLS here, use sslmode=require or stronger$/
        )
      }
      // allow: without TLS first; refused, then with TLS.
      expect(yield* sessionSsl(tls.url("127.0.0.1", "docket", { sslmode: "allow" }))).toBe(true)
      // prefer: with TLS first; a failed handshake falls back to no TLS where the server allows it (libpq too).
      expect(yield* sessionSsl(tls.url("127.0.0.1", "postgres", { sslmode: "prefer", sslrootcert: otherCa }))).toBe(false)
      expect(yield* sessionSsl(tls.url("127.0.0.1", "postgres", { sslmode: "prefer" }))).toBe(true)
      // An unknown sslmode: refused before connecting (nothing listens on port 1: a connection would say so).
      const unknown = yield* refusal("postgres://root@127.0.0.1:1/docket?sslmode=verfy-full")
      expect(unknown).toMatchObject({ setting: "sslmode", reason: expect.stringMatching(/^sslmode: "verfy-full" \(in the URL\) is not one of/) })
    }))

  it.live("a server without TLS: prefer connects without it, require and stronger are refused with the reason", () =>
    Effect.gen(function*() {
      expect(yield* sessionSsl(`${plain.url()}?sslmode=prefer`)).toBe(false)
      expect(yield* sessionSsl(`${plain.url()}?sslmode=allow`)).toBe(false)
      expect((yield* refusal(`${plain.url()}?sslmode=require`)).reason).toBe(
        "Failed to connect: the server does not accept TLS (sslmode=require): turn ssl on in its postgresql.conf, or use sslmode=prefer or disable"
      )
    }))

  it.live("the settings as Database.Options.tls (a file or the PEM text), and a client certificate with an encrypted key", () =>
    Effect.gen(function*() {
      const { ca, clientCert, clientKey } = tls.certs
      expect(yield* sessionSsl(tls.url("localhost", "docket"), { tls: { mode: "verify-full", rootCert: ca } })).toBe(true)
      const pemText = readFileSync(ca, "utf8")
      expect(yield* sessionSsl(tls.url("localhost", "docket"), { tls: { mode: "verify-full", rootCert: pemText } })).toBe(true)
      // certdb wants a client certificate (pg_hba.conf `cert`).
      expect((yield* refusal(tls.url("localhost", "certdb", { sslmode: "verify-full", sslrootcert: ca }))).reason).toBe(
        "Failed to connect: connection requires a valid client certificate: give sslcert and sslkey (a client certificate signed by a CA in the server's ssl_ca_file)"
      )
      const withCert = { sslmode: "verify-full", sslrootcert: ca, sslcert: clientCert, sslkey: clientKey }
      expect(yield* sessionSsl(tls.url("localhost", "certdb", { ...withCert, sslpassword: CLIENT_KEY_PASSWORD }))).toBe(true)
      expect(yield* sessionSsl(tls.url("localhost", "certdb"), {
        tls: { mode: "verify-full", rootCert: ca, cert: clientCert, key: clientKey, password: CLIENT_KEY_PASSWORD }
      })).toBe(true)
      // A client certificate the server's CA did not sign: refused by the server, said so.
      const stranger = { sslmode: "verify-full", sslrootcert: ca, sslcert: tls.certs.strangerCert, sslkey: tls.certs.strangerKey }
      expect((yield* refusal(tls.url("localhost", "certdb", stranger))).reason).toBe(
        `Failed to connect: the server refused the client certificate in sslcert=${tls.certs.strangerCert} (its TLS alert: unknown ca): ` +
          "give sslcert a certificate signed by a CA in the server's ssl_ca_file"
      )
      const wrongPassword = yield* refusal(tls.url("localhost", "certdb", { ...withCert, sslpassword: "not it" }))
      expect(wrongPassword).toMatchObject({ setting: "sslpassword", reason: expect.stringMatching(/cannot read the client key: wrong sslpassword/) })
      expect(wrongPassword.target).not.toContain("not it")
    }))

  const Ok = Handler.make("tls.ok", { payload: Schema.Unknown, run: () => Effect.void })

  it.live("a worker over verify-full: migrated, woken through LISTEN over TLS, every session encrypted; the cancel's connection too", () =>
    Effect.gen(function*() {
      const url = tls.url("localhost", "docket", { sslmode: "verify-full", sslrootcert: tls.certs.ca })
      // Polling once a minute: only the LISTEN connection can start the item soon.
      const pool = Worker.layer({ handlers: [Ok], poll: "1 minute" }).pipe(Layer.provideMerge(repoLayer(url)))
      const context = yield* Layer.build(pool)
      const worker = yield* Effect.provide(Worker.Worker, context)
      const events = yield* worker.subscribe
      yield* worker.whenIdle
      // Enqueued through a queue of its own (its own Wakeups): only a notification wakes the worker.
      const added = yield* Effect.scoped(Effect.provide(Docket.client(Ok).enqueue({}), repoLayer(url)))
      yield* waitForEvent(events, (e) => e._tag === "Completed" && e.claim.id === added.id, "15 seconds")
      const sessions = yield* Effect.promise(() =>
        tls.cluster.query((c) =>
          c.query<{ application_name: string; ssl: boolean }>(
            `SELECT a.application_name, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.datname = 'docket'`
          )
        )
      )
      expect(sessions.rows.map((r) => r.application_name)).toContain("docket listen")
      expect(sessions.rows.filter((r) => !r.ssl)).toEqual([])
      // A cancel request (PostgreSQL's, as libpq's PQcancel: the session's key, no login, so pg_hba.conf's
      // TLS-only rule does not apply to it) cancels another session's statement on the TLS cluster.
      const direct = Context.unsafeGet(context, DirectPool.DirectPool)
      const cancelled = yield* Effect.promise(() =>
        tls.cluster.query(async (c) => {
          const pid = (await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid
          const sleeping = c.query("SELECT pg_sleep(30)").then(() => "finished", (e: { code?: string }) => e.code)
          // Wait until it is running, then cancel.
          for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
            const active = await tls.cluster.query((o) =>
              o.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", [pid])
            )
            if (active.rowCount === 1) break
            await new Promise((r) => setTimeout(r, 20))
          }
          await direct.cancel({ processID: pid, secretKey: (c as unknown as { secretKey: number }).secretKey })
          return sleeping
        })
      )
      expect(cancelled).toBe("57014")
    }).pipe(Effect.scoped))

  it("the command: the same URL parameters; a bad sslmode is bad input (exit 2) naming it", async () => {
    const url = tls.url("localhost", "docket", { sslmode: "verify-full", sslrootcert: tls.certs.ca })
    const [stats, bad] = await docketAll([
      ["stats", "--json", "--database", url],
      ["stats", "--database", tls.url("localhost", "docket", { sslmode: "verify_full" })]
    ])
    expect(stats.stderr).toBe("")
    expect(stats.code).toBe(0)
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/sslmode: "verify_full" \(in the URL\) is not one of disable, allow, prefer, require, verify-ca, verify-full/)
  })
})
