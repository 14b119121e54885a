/**
 * Certificates made with the system's openssl, and a PostgreSQL cluster of
 * the test's own serving TLS with them (test/support/cluster.ts).
 *
 * - `ca.crt`: the CA that signed the server's certificate and the client's;
 * - `server.crt`: for the name `localhost` only (no IP address in it), so
 *   `verify-full` to `localhost` passes and to `127.0.0.1` does not;
 * - `other-ca.crt`: a CA that signed nothing here (the wrong CA);
 * - `client.crt`, `client.key`: a client certificate for the user `root`,
 *   its key encrypted with `CLIENT_KEY_PASSWORD`;
 * - `stranger.crt`: a client certificate for `root` from the other CA.
 *
 * The cluster's pg_hba.conf refuses every connection without TLS except the
 * harness's own (`root` to the database `postgres`), so a test that reaches
 * any other database has shown TLS was used; the database `certdb` also
 * wants a client certificate (`cert`: its CN is the user).
 */
import { execFileSync } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Cluster, privateCluster } from "./cluster.js"
import { IN_CI } from "./db.js"

const OPENSSL = process.env.DOCKET_TEST_OPENSSL ?? "/usr/bin/openssl"

/** Whether certificates can be made here (outside CI, a warning when not; in CI, a failure). */
export const opensslAvailable: boolean = (() => {
  if (existsSync(OPENSSL)) return true
  if (IN_CI) throw new Error(`openssl is required in CI for the TLS tests: none at ${OPENSSL} (DOCKET_TEST_OPENSSL)`)
  console.warn(`TLS tests skipped: no openssl at ${OPENSSL} (set DOCKET_TEST_OPENSSL)`)
  return false
})()

/** The passphrase of `client.key`. */
export const CLIENT_KEY_PASSWORD = "docket-test-passphrase"

const openssl = (cwd: string, ...args: Array<string>) => execFileSync(OPENSSL, args, { cwd, stdio: "pipe" })

// One P-256 key and a certificate signed by `ca` (or self-signed when `ca` is undefined).
const issue = (dir: string, name: string, subject: string, extensions: string, ca?: string) => {
  openssl(dir, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", `${name}.key`)
  writeFileSync(join(dir, `${name}.ext`), extensions)
  openssl(dir, "req", "-new", "-key", `${name}.key`, "-subj", subject, "-out", `${name}.csr`)
  const signer = ca === undefined ? ["-signkey", `${name}.key`] : ["-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-CAcreateserial"]
  openssl(dir, "x509", "-req", "-in", `${name}.csr`, ...signer, "-days", "2", "-extfile", `${name}.ext`, "-out", `${name}.crt`)
}

/** The certificates' folder and files. */
export interface Certificates {
  readonly dir: string
  readonly ca: string
  readonly otherCa: string
  readonly serverCert: string
  readonly serverKey: string
  readonly clientCert: string
  /** Encrypted with CLIENT_KEY_PASSWORD. */
  readonly clientKey: string
  /** A client certificate for `root` from the other CA (which the server does not trust), and its key. */
  readonly strangerCert: string
  readonly strangerKey: string
}

/** Makes the certificates in a new folder the `postgres` user can read (the server's key its own, 0600). */
export const makeCertificates = (): Certificates => {
  const dir = mkdtempSync(join(tmpdir(), "docket-tls-"))
  const caExt = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
  issue(dir, "ca", "/CN=Docket test CA", caExt)
  issue(dir, "other-ca", "/CN=Docket unrelated CA", caExt)
  const leaf = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
  issue(dir, "server", "/CN=localhost", `${leaf}extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n`, "ca")
  issue(dir, "client", "/CN=root", `${leaf}extendedKeyUsage=clientAuth\n`, "ca")
  issue(dir, "stranger", "/CN=root", `${leaf}extendedKeyUsage=clientAuth\n`, "other-ca")
  openssl(dir, "pkcs8", "-topk8", "-in", "client.key", "-v2", "aes-256-cbc", "-passout", `pass:${CLIENT_KEY_PASSWORD}`, "-out", "client-encrypted.key")
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim())
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())
    chownSync(dir, uid, gid)
    chownSync(join(dir, "server.key"), uid, gid)
  }
  chmodSync(dir, 0o755)
  chmodSync(join(dir, "server.key"), 0o600)
  const file = (name: string) => join(dir, name)
  return {
    dir,
    ca: file("ca.crt"),
    otherCa: file("other-ca.crt"),
    serverCert: file("server.crt"),
    serverKey: file("server.key"),
    clientCert: file("client.crt"),
    clientKey: file("client-encrypted.key"),
    strangerCert: file("stranger.crt"),
    strangerKey: file("stranger.key")
  }
}

const HBA = `# Written by test/support/tls.ts.
local     all       all   trust
hostnossl postgres  root  127.0.0.1/32  trust
hostnossl all       all   127.0.0.1/32  reject
hostssl   certdb    all   127.0.0.1/32  cert
hostssl   all       all   127.0.0.1/32  trust
`

/** A cluster serving TLS with `certs`, databases `docket` and `certdb` made, pg_hba.conf as in the module doc. */
export interface TlsCluster {
  readonly cluster: Cluster
  readonly certs: Certificates
  /** `postgres://root@<host>:<port>/<database>` with `params` as its query. */
  readonly url: (host: "localhost" | "127.0.0.1", database: string, params?: Readonly<Record<string, string>>) => string
  readonly destroy: () => Promise<void>
}

/** A query string for a URL (empty for no parameters). */
export const query = (params: Readonly<Record<string, string>> = {}): string => {
  const text = new URLSearchParams(params).toString()
  return text === "" ? "" : `?${text}`
}

/** Starts the TLS cluster (ssl on, its own pg_hba.conf loaded once this returns). */
export const tlsCluster = async (): Promise<TlsCluster> => {
  const certs = makeCertificates()
  const cluster = await privateCluster({
    settings: { ssl: "on", ssl_cert_file: certs.serverCert, ssl_key_file: certs.serverKey, ssl_ca_file: certs.ca }
  })
  const url = (host: string, database: string, params?: Readonly<Record<string, string>>) =>
    `postgres://root@${host}:${cluster.port}/${database}${query(params)}`
  try {
    const hba = await cluster.query(async (c) => {
      await c.query("CREATE DATABASE docket")
      await c.query("CREATE DATABASE certdb")
      return (await c.query<{ hba_file: string }>("SHOW hba_file")).rows[0].hba_file
    })
    writeFileSync(hba, HBA)
    await cluster.query((c) => c.query("SELECT pg_reload_conf()"))
    // The reload is a signal: loaded once a connection without TLS to docket is refused.
    const deadline = Date.now() + 30_000
    for (;;) {
      const refused = await cluster.query(() => Promise.resolve(false), "docket").catch(() => true)
      if (refused) break
      if (Date.now() > deadline) throw new Error("the TLS cluster's pg_hba.conf was not loaded within 30 s")
      await new Promise((r) => setTimeout(r, 50))
    }
  } catch (error) {
    await cluster.destroy()
    rmSync(certs.dir, { recursive: true, force: true })
    throw error
  }
  return {
    cluster,
    certs,
    url,
    destroy: async () => {
      await cluster.destroy()
      rmSync(certs.dir, { recursive: true, force: true })
    }
  }
}
